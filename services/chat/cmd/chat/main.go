// Command chat runs the chat service.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/services/chat/service"
)

func main() {
	fs := flag.NewFlagSet("chat", flag.ExitOnError)
	common := config.Service(fs, ":7003", ":9003")
	keep := config.Int(fs, "history-keep", "VIGIL_CHAT_HISTORY_KEEP", 1000, "messages kept per room")
	onJoin := config.Int(fs, "history-on-join", "VIGIL_CHAT_HISTORY_ON_JOIN", 50, "messages a new member gets")
	_ = fs.Parse(os.Args[1:])

	config.Main("chat", func(ctx context.Context) error {
		svc, err := service.New(ctx, service.Options{
			Core:          common.Core(),
			HistoryKeep:   *keep,
			HistoryOnJoin: *onJoin,
		})
		if err != nil {
			return err
		}
		return svc.Serve(ctx)
	})
}

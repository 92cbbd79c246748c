// Command chat runs the chat service.
package main

import (
	"context"
	"flag"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/chat/service"
)

func main() {
	fs := flag.NewFlagSet("chat", flag.ExitOnError)
	keep := config.Int(fs, "history-keep", "VIGIL_CHAT_HISTORY_KEEP", 1000, "messages kept per room")
	onJoin := config.Int(fs, "history-on-join", "VIGIL_CHAT_HISTORY_ON_JOIN", 50, "messages a new member gets")

	config.Serve(fs, ":7003", ":9003", func(ctx context.Context, core server.Core) (*service.Service, error) {
		return service.New(ctx, service.Options{
			Core:          core,
			HistoryKeep:   *keep,
			HistoryOnJoin: *onJoin,
		})
	})
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestChatAndRoomsAgainstARunningChatServer runs the two-process design in one test: a
// chat-server on a real Redis (services and gateway), then chat and rooms as its clients. Every
// socket receives the messages (none closed as a slow consumer) and the idle memory is read
// from the server's /mem. Nothing here judges speed.
func TestChatAndRoomsAgainstARunningChatServer(t *testing.T) {
	// chat-server takes fixed addresses, as the client processes must know them.
	gw, stats := servertest.FreeAddr(t), servertest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- runHarness(ctx, "chat-server", benchmarks["chat-server"], []string{
			"-redis", redistest.URL(t), "-addr", gw, "-stats", stats,
			"-chat", servertest.FreeAddr(t), "-lobby", servertest.FreeAddr(t), "-room", servertest.FreeAddr(t),
		}, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("chat-server: %v", err)
		}
	})
	wait.For(t, "the chat-server's gateway and /mem", func() error {
		for _, u := range []string{"http://" + gw + "/healthz", "http://" + stats + "/mem"} {
			res, err := http.Get(u)
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", u, res.Status)
			}
		}
		return nil
	})

	got := runJSON(t, "chat", "-gw", gw, "-stats", stats, "-sockets", "20", "-senders", "5", "-rates", "50",
		"-duration", "500ms", "-warmup", "200ms", "-pack")
	if got["rates/50 msg/s/delivered/s"] <= 0 || got["rates/50 msg/s/sockets closed"] != 0 {
		t.Errorf("chat: delivered/s %v, sockets closed %v; want deliveries and none closed (%v)",
			got["rates/50 msg/s/delivered/s"], got["rates/50 msg/s/sockets closed"], got)
	}
	if got["idle_goroutines"] <= 0 {
		t.Errorf("chat: goroutines per idle socket = %v, want the server's growth read from /mem", got["idle_goroutines"])
	}

	got = runJSON(t, "rooms", "-gw", gw, "-stats", stats, "-viewers", "20", "-rates", "20",
		"-duration", "500ms", "-warmup", "200ms")
	if got["rates/20 frames/s/deliveries/s"] <= 0 || got["rates/20 frames/s/viewers closed"] != 0 {
		t.Errorf("rooms: deliveries/s %v, viewers closed %v; want deliveries and none closed (%v)",
			got["rates/20 frames/s/deliveries/s"], got["rates/20 frames/s/viewers closed"], got)
	}
}

func TestParseRatesRefusesWhatIsNotAPositiveRate(t *testing.T) {
	if got, err := parseRates("10, 100"); err != nil || len(got) != 2 || got[0] != 10 || got[1] != 100 {
		t.Fatalf("parseRates(\"10, 100\") = %v, %v; want [10 100]", got, err)
	}
	for _, bad := range []string{"", "x", "10,0", "-5"} {
		if _, err := parseRates(bad); err == nil || !strings.Contains(err.Error(), "positive whole numbers") {
			t.Errorf("parseRates(%q) = %v, want a usage error naming positive whole numbers", bad, err)
		}
	}
}

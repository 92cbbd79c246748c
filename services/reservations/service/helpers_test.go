package service

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// start runs the service with o until the test ends and returns its gRPC address. The alarm
// lines are discarded unless o names a writer.
func start(t *testing.T, o Options) string {
	t.Helper()
	if o.AlarmLog == nil {
		o.AlarmLog = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := New(ctx, o)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(wait.Deadline):
			t.Errorf("Serve did not return %v after its context ended", wait.Deadline)
		}
	})
	return svc.Addr().String()
}

package server

import (
	"context"
	"net"
)

// Service is what each service's New returns: a server listening at Addr, serving until the
// context of Serve ends.
type Service interface {
	Addr() net.Addr
	Serve(ctx context.Context) error
}

// Run is a service's life in a process that runs several (the dev runner, tests): it serves
// until ctx ends, calling ready once it listens.
type Run func(ctx context.Context, ready func(net.Addr)) error

// RunOf is the Run of the service newSvc builds from the options opts gives when the Run
// starts (so they may name a service started before it, e.g. the room's Lobby address).
func RunOf[O any, S Service](newSvc func(context.Context, O) (S, error), opts func() O) Run {
	return func(ctx context.Context, ready func(net.Addr)) error {
		svc, err := newSvc(ctx, opts())
		if err != nil {
			return err
		}
		ready(svc.Addr())
		return svc.Serve(ctx)
	}
}

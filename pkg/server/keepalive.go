package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// keepaliveEnforcement lets a client ping every 5s, with or without calls open: pkg/grpcdial's
// clients ping after 10s of silence, so none is sent GOAWAY "too_many_pings"; a client pinging
// more often than every 5s is.
var keepaliveEnforcement = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// keepaliveParams are the server's own pings: a connection that read nothing for 10s is
// pinged, and closed when the ping goes unanswered for 5s. A client that was paused or cut
// off (a gateway, a lock client) thus leaves its streams within 15s, and what they held is let
// go as when the client closes them.
var keepaliveParams = keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}

// keepaliveOptions are every server's side of the keepalive pkg/grpcdial's clients use.
func keepaliveOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepaliveEnforcement), grpc.KeepaliveParams(keepaliveParams)}
}

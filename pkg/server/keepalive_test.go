package server

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/grpcdial"
)

// The servers accept the clients' pings: a client pinging more often than the enforcement's
// MinTime would be sent GOAWAY and lose its calls.
func TestKeepaliveEnforcementAcceptsTheClients(t *testing.T) {
	if keepaliveEnforcement.MinTime > grpcdial.KeepaliveTime {
		t.Errorf("enforcement MinTime %v > grpcdial.KeepaliveTime %v: every Vigil client would be sent GOAWAY", keepaliveEnforcement.MinTime, grpcdial.KeepaliveTime)
	}
	if !keepaliveEnforcement.PermitWithoutStream && grpcdial.ClientParameters().PermitWithoutStream {
		t.Error("clients ping idle connections but the servers refuse it")
	}
	if keepaliveParams.Time <= 0 || keepaliveParams.Timeout <= 0 {
		t.Errorf("server keepalive %+v: a silent client is never noticed", keepaliveParams)
	}
}

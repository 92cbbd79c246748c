package gateway

import (
	"net/http"

	"github.com/vigil-dev/vigil/gateway/socket"
)

// isWebSocketUpgrade reports whether r asks to upgrade to a WebSocket (see gateway/socket,
// which owns every socket of the gateway).
func isWebSocketUpgrade(r *http.Request) bool { return socket.IsUpgrade(r) }

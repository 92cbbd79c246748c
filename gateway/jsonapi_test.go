package gateway

import (
	"testing"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
)

// TestSafeIntegers: every integer field takes a JSON integer within ±(2^53−1) and refuses
// anything else with a sentence, at the edges and beyond, nested or not.
func TestSafeIntegers(t *testing.T) {
	m := fuzzMarshaler()
	for _, c := range []struct {
		body string
		want string // "" accepted
	}{
		{`{"ttlMs": 9007199254740991}`, ""},
		{`{"ttlMs": -9007199254740991}`, ""},
		{`{"ttlMs": 9007199254740992}`, "ttlMs must be an integer from 100 through 3600000."},
		{`{"ttlMs": 9007199254740993}`, "ttlMs must be an integer from 100 through 3600000."},
		{`{"ttlMs": -9007199254740992}`, "ttlMs must be an integer from 100 through 3600000."},
		{`{"ttlMs": 1e17}`, "ttlMs must be an integer from 100 through 3600000."},
		{`{"ttlMs": 1.5}`, "ttlMs must be an integer from 100 through 3600000."},
	} {
		err := m.Unmarshal([]byte(c.body), &locksv1.AcquireRequest{})
		if got := errString(err); got != c.want {
			t.Errorf("AcquireRequest %s: %q, want %q", c.body, got, c.want)
		}
	}
	for _, c := range []struct {
		body string
		want string
	}{
		{`{"limit": 2147483647}`, ""},
		{`{"limit": 2147483648}`, "limit must be an integer from -2147483648 through 2147483647."},
		{`{"before": 9007199254740993}`, "before must be an integer from -9007199254740991 through 9007199254740991."},
		{`{"since": -9007199254740993}`, "since must be an integer from -9007199254740991 through 9007199254740991."},
		{`{"since": 12E2}`, "since must be an integer from -9007199254740991 through 9007199254740991."},
	} {
		err := m.Unmarshal([]byte(c.body), &chatv1.ListMessagesRequest{})
		if got := errString(err); got != c.want {
			t.Errorf("ListMessagesRequest %s: %q, want %q", c.body, got, c.want)
		}
	}
	if got := errString(m.Unmarshal([]byte(`{"name": "r", "video": {"title": "t", "durationMs": 9007199254740993}}`), &lobbyv1.CreateRoomRequest{})); got != "video.durationMs must be an integer from 1 through 86400000." {
		t.Errorf("nested durationMs beyond 2^53: %q", got)
	}
	req := &reservationsv1.ReplayAlarmRequest{}
	if err := m.Unmarshal([]byte(`{"now": 9007199254740991}`), req); err != nil || req.GetNow() != 9007199254740991 {
		t.Errorf("now = 2^53-1: %v, %d", err, req.GetNow())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSafeIntegerQueries: integer query parameters follow the same rules as bodies.
func TestSafeIntegerQueries(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	for q, want := range map[string]string{
		"limit=10":                   "",
		"limit=4294967297":           "limit must be an integer from 1 through 1000.",
		"limit=1e2":                  "limit must be an integer from 1 through 1000.",
		"before=9007199254740993":    "before must be an integer from 1 through 9007199254740991.",
		"before=9007199254740991":    "",
		"since=-1":                   "since must be an integer from 0 through 9007199254740991.",
		"since=1.5":                  "since must be an integer from 0 through 9007199254740991.",
		"since=99999999999999999999": "since must be an integer from 0 through 9007199254740991.",
	} {
		r := call(t, "GET", gw.URL+"/chat/rooms/general/messages?"+q, "")
		switch {
		case want == "" && r.code != 200:
			t.Errorf("?%s = %d %s, want 200", q, r.code, r.raw)
		case want != "" && (r.code != 400 || r.body["error"] != want):
			t.Errorf("?%s = %d %s, want 400 %q", q, r.code, r.raw, want)
		}
	}
}

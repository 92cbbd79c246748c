package auth

import (
	"os"
	"strings"
	"testing"
)

func TestParseAPIKeys(t *testing.T) {
	t.Parallel()
	key, hash := NewAPIKey()
	keys, err := ParseAPIKeys("# comment\n\nci " + hash + " reservations:write,locks\n; ops " + HashAPIKey("other") + " admin")
	if err != nil {
		t.Fatalf("ParseAPIKeys = %v", err)
	}
	if len(keys) != 2 || keys[0].Name != "ci" || len(keys[0].Scopes) != 2 || keys[1].Scopes[0] != "admin" {
		t.Fatalf("ParseAPIKeys = %+v, want ci (2 scopes) and ops (admin)", keys)
	}
	a := &authenticator{keys: keys}
	if k, ok := a.lookup(key); !ok || k.Name != "ci" {
		t.Fatalf("lookup(ci's key) = %v, %v, want ci", k, ok)
	}
	if _, ok := a.lookup(key + "x"); ok {
		t.Fatal("lookup(a longer key) matched, want no match")
	}
	bad := map[string]string{
		"plain key":     "ci " + key + " locks",
		"unknown scope": "ci " + hash + " locks:everything",
		"no scope":      "ci " + hash,
		"short hash":    "ci sha256:abcd locks",
		"twice":         "ci " + hash + " locks\nci " + hash + " chat",
	}
	for name, text := range bad {
		_, err := ParseAPIKeys(text)
		if err == nil {
			t.Errorf("ParseAPIKeys(%s) = nil error, want an error", name)
			continue
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("ParseAPIKeys(%s) error %q quotes the key", name, err)
		}
	}
	dir := t.TempDir()
	file := dir + "/keys"
	if err := os.WriteFile(file, []byte("ci "+hash+" locks\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err = LoadAPIKeys(file, "ops "+HashAPIKey("x")+" admin")
	if err != nil || len(keys) != 2 {
		t.Fatalf("LoadAPIKeys(file, env) = %v, %v, want 2 keys", keys, err)
	}
}

func TestGrants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		have, want string
		ok         bool
	}{
		{"admin", "admin", true},
		{"admin", "locks:write", true},
		{"locks", "locks:write", true},
		{"locks", "locks:read", true},
		{"locks", "admin", false},
		{"locks:read", "locks:write", false},
		{"locks:write", "locks:read", true},
		{"chat:write", "chat:read", true},
		{"lobby:create", "lobby:read", false},
		{"lobby:join", "lobby:create", false},
		{"reservations:write", "locks:write", false},
		{"reservations:write", "admin", false},
		{"reservations", "", true},
	}
	for _, c := range cases {
		if got := grants(c.have, c.want); got != c.ok {
			t.Errorf("grants(%q, %q) = %v, want %v", c.have, c.want, got, c.ok)
		}
	}
}

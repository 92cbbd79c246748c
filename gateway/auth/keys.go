package auth

// Authentication at the edge. Off when no API key is configured (the zero-setup development
// mode); on in the deployed configuration. A request presents its key as
// "Authorization: Bearer <key>" or "X-API-Key: <key>"; each route needs one scope, a key holds
// a list of them. Keys are kept only as SHA-256 hashes, compared in constant time, and never
// logged. Browsers, which cannot set headers on a WebSocket, trade a key for a short-lived
// socket token (POST /auth/socket-token) and pass it as ?access_token= on the upgrade.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/gateway/socket"
)

// Scopes a key may hold. A route needs one; see routeScopes (scopes.go).
const (
	// ScopeAdmin grants every scope, and alone grants the operators' routes and replaying
	// alarms.
	ScopeAdmin = "admin"
)

// knownScopes are the scopes a key file may name. A bare domain ("locks") grants every action
// of the domain except replay; "<domain>:write" also grants "<domain>:read".
var knownScopes = []string{
	ScopeAdmin,
	"reservations", "reservations:read", "reservations:write",
	"locks", "locks:read", "locks:write",
	"chat", "chat:read", "chat:write",
	"lobby", "lobby:read", "lobby:create", "lobby:join",
}

// grants reports whether a key holding scope have may call a route that needs want.
func grants(have, want string) bool {
	switch {
	case want == "" || have == ScopeAdmin || have == want:
		return true
	case want == ScopeAdmin:
		return false
	}
	domain, action, _ := strings.Cut(want, ":")
	return have == domain || (action == "read" && have == domain+":write")
}

// APIKey is one key the gateway accepts: its name (logged, never the key), the SHA-256 of the
// key, and its scopes.
type APIKey struct {
	Name   string
	Hash   [sha256.Size]byte
	Scopes []string
}

// HashAPIKey is how a key is stored: "sha256:" and the hex SHA-256 of the key. API keys are
// long random strings, so a fast hash is enough; what matters is that the config holds no key.
func HashAPIKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(h[:])
}

// NewAPIKey makes a random key ("vk_" and 43 base64url characters, 256 bits) and its hash.
func NewAPIKey() (key, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key = "vk_" + base64.RawURLEncoding.EncodeToString(b)
	return key, HashAPIKey(key)
}

// ParseAPIKeys reads keys, one a line: a name, the key's hash as HashAPIKey writes it, and its
// scopes separated by commas or spaces. Blank lines and lines starting with # are skipped;
// ";" also ends a line, so a list fits in one environment variable:
//
//	ci     sha256:9f86d08…  reservations:write,locks
//	ops    sha256:60303ae…  admin
func ParseAPIKeys(text string) ([]APIKey, error) {
	var keys []APIKey
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, ";", "\n")))
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(strings.ReplaceAll(sc.Text(), ",", " "))
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("api keys line %d: want a name, a sha256: hash and at least one scope", line)
		}
		k := APIKey{Name: f[0], Scopes: f[2:]}
		hexHash, ok := strings.CutPrefix(f[1], "sha256:")
		b, err := hex.DecodeString(hexHash)
		if !ok || err != nil || len(b) != sha256.Size {
			// The message names the line, never its content: a pasted plain key stays out of logs.
			return nil, fmt.Errorf("api keys line %d (%s): the second field must be sha256:<64 hex digits> (store the key's hash, not the key)", line, k.Name)
		}
		copy(k.Hash[:], b)
		for _, s := range k.Scopes {
			if !slices.Contains(knownScopes, s) {
				return nil, fmt.Errorf("api keys line %d (%s): unknown scope %q; known: %s", line, k.Name, s, strings.Join(knownScopes, " "))
			}
		}
		if slices.ContainsFunc(keys, func(o APIKey) bool { return o.Name == k.Name }) {
			return nil, fmt.Errorf("api keys line %d: the name %s is used twice", line, k.Name)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// LoadAPIKeys reads keys from a file (when file is set) and from the text of an environment
// variable's value (when env is set), in that order.
func LoadAPIKeys(file, env string) ([]APIKey, error) {
	var text string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("api keys: %w", err)
		}
		text = string(b) + "\n"
	}
	return ParseAPIKeys(text + env)
}

// principal is who made a request: a key's name and scopes, or nobody (anonymous).
type principal struct {
	name   string
	scopes []string
}

func (p *principal) may(want string) bool {
	return slices.ContainsFunc(p.scopes, func(s string) bool { return grants(s, want) })
}

// allowed reports whether p may call a route that needs want (a scope of routeScopes).
func (p *principal) allowed(want string) bool {
	switch want {
	case ScopePublic:
		return true
	case ScopeAnyKey:
		return p.name != ""
	}
	return p.may(want)
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p *principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// ServeSocketToken answers POST /auth/socket-token with a short-lived token for the caller's
// scopes (Wrap puts the caller in the request's context), for a browser to open WebSockets
// with.
func (gd *Guard) ServeSocketToken(w http.ResponseWriter, r *http.Request) {
	p, _ := r.Context().Value(principalKey{}).(*principal)
	if p == nil {
		jsonapi.WriteError(w, http.StatusNotFound, "No route POST /auth/socket-token.")
		return
	}
	gd.a.serveSocketToken(w, p)
}

// authenticator checks API keys and socket tokens.
type authenticator struct {
	keys      []APIKey
	anonymous []string
	secret    []byte
	tokenTTL  time.Duration
	now       func() time.Time
}

// errBadCredentials is a key or token that matches nothing (or has expired).
var errBadCredentials = errors.New("bad credentials")

// lookup finds the key whose hash matches, comparing against every key in constant time so
// the answer's timing tells nothing about which key, or how much of one, matched.
func (a *authenticator) lookup(presented string) (*APIKey, bool) {
	h := sha256.Sum256([]byte(presented))
	found := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(h[:], a.keys[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &a.keys[found], true
}

// presentedKey is the key a request carries in X-API-Key or Authorization: Bearer.
func presentedKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// identify returns the request's principal: from its key, from a socket token on a WebSocket
// upgrade, or anonymous (nil scopes beyond AnonymousScopes) when it carries neither.
func (a *authenticator) identify(r *http.Request, route string) (*principal, error) {
	if key := presentedKey(r); key != "" {
		if k, ok := a.lookup(key); ok {
			return &principal{name: k.Name, scopes: k.Scopes}, nil
		}
		// DELETE /lobby/rooms/{code} carries the room's leader token as its bearer: that
		// route takes the API key from X-API-Key, and its bearer is the service's business.
		if r.Header.Get("X-API-Key") != "" || route != "DELETE /lobby/rooms/{code}" {
			return nil, errBadCredentials
		}
	}
	if tok := r.URL.Query().Get("access_token"); tok != "" {
		if !socket.IsUpgrade(r) {
			return nil, errBadCredentials
		}
		p, err := a.verifySocketToken(tok)
		if err != nil {
			return nil, err
		}
		// The token is spent on this check: the route's own handler never sees it.
		q := r.URL.Query()
		q.Del("access_token")
		r.URL.RawQuery = q.Encode()
		return p, nil
	}
	return &principal{scopes: a.anonymous}, nil
}

// socketToken is the signed body of a socket token.
type socketToken struct {
	Name    string   `json:"n"`
	Scopes  []string `json:"s"`
	Expires int64    `json:"e"`
}

// issueSocketToken signs a token for p valid for tokenTTL.
func (a *authenticator) issueSocketToken(p *principal) (string, int64) {
	exp := a.now().Add(a.tokenTTL).UnixMilli()
	body, _ := json.Marshal(socketToken{Name: p.name, Scopes: p.scopes, Expires: exp})
	payload := base64.RawURLEncoding.EncodeToString(body)
	return "st1." + payload + "." + base64.RawURLEncoding.EncodeToString(a.sign(payload)), exp
}

func (a *authenticator) sign(payload string) []byte {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte("vigil socket token\x00" + payload))
	return m.Sum(nil)
}

// verifySocketToken checks a token's signature and expiry.
func (a *authenticator) verifySocketToken(tok string) (*principal, error) {
	rest, ok := strings.CutPrefix(tok, "st1.")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, errBadCredentials
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.sign(payload)) {
		return nil, errBadCredentials
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, errBadCredentials
	}
	var st socketToken
	if json.Unmarshal(body, &st) != nil || a.now().UnixMilli() >= st.Expires {
		return nil, errBadCredentials
	}
	return &principal{name: st.Name, scopes: st.Scopes}, nil
}

// serveSocketToken answers POST /auth/socket-token with a short-lived token for the caller's
// scopes, for a browser to open WebSockets with.
func (a *authenticator) serveSocketToken(w http.ResponseWriter, p *principal) {
	tok, exp := a.issueSocketToken(p)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expiresAt": exp, "scopes": p.scopes})
}

func refuseUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
	jsonapi.WriteError(w, http.StatusUnauthorized, "Send a valid API key as Authorization: Bearer <key> or X-API-Key: <key>.")
}

func refuseScope(w http.ResponseWriter, want string) {
	jsonapi.WriteError(w, http.StatusForbidden, fmt.Sprintf("This API key lacks the %s scope this route needs.", want))
}

// ValidScope reports whether s is a scope a key may hold.
func ValidScope(s string) bool { return slices.Contains(knownScopes, s) }

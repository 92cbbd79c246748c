package gateway

import "github.com/vigil-dev/vigil/gateway/auth"

// The security options live with the part that enforces them (gateway/auth); these names keep
// the gateway's API in one place for its callers.
type (
	// Security is the edge's protection: see auth.Security.
	Security = auth.Security
	// Limits bound the HTTP requests one client may make: see auth.Limits.
	Limits = auth.Limits
	// APIKey is one key the gateway accepts: see auth.APIKey.
	APIKey = auth.APIKey
)

// ScopeAdmin grants every scope: see auth.ScopeAdmin.
const ScopeAdmin = auth.ScopeAdmin

// ParseAPIKeys reads keys in the key file's format: see auth.ParseAPIKeys.
func ParseAPIKeys(text string) ([]APIKey, error) { return auth.ParseAPIKeys(text) }

// LoadAPIKeys reads keys from a file and an environment variable's value: see auth.LoadAPIKeys.
func LoadAPIKeys(file, env string) ([]APIKey, error) { return auth.LoadAPIKeys(file, env) }

// HashAPIKey is how a key is stored: see auth.HashAPIKey.
func HashAPIKey(key string) string { return auth.HashAPIKey(key) }

// NewAPIKey makes a random key and its hash: see auth.NewAPIKey.
func NewAPIKey() (key, hash string) { return auth.NewAPIKey() }

package redisx

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SentinelScheme and SentinelTLSScheme start a Sentinel URL:
// redis+sentinel://[user:password@]host1:port1,host2:port2/mastername[/db]; rediss+sentinel://
// speaks TLS to the Sentinels and to the Redis nodes they name. The user and password are the
// Redis nodes'; the Sentinels' own password is Config.SentinelPassword.
const (
	SentinelScheme    = "redis+sentinel"
	SentinelTLSScheme = "rediss+sentinel"
)

// IsSentinelURL reports whether u is a Sentinel URL (redis+sentinel:// or rediss+sentinel://).
func IsSentinelURL(u string) bool {
	return strings.HasPrefix(u, SentinelScheme+"://") || strings.HasPrefix(u, SentinelTLSScheme+"://")
}

// sentinelURL is what a Sentinel URL names.
type sentinelURL struct {
	addrs              []string
	master             string
	db                 int
	username, password string
	tls                bool
}

// sentinelHelp ends every refusal of a Sentinel setting with the form it wants.
const sentinelHelp = "want redis+sentinel://[user:password@]host1:port1,host2:port2/mastername[/db], " +
	"or -redis-sentinels host1:port1,host2:port2 with -redis-master mastername"

// parseSentinelURL reads a Sentinel URL. Its errors never quote the password.
func parseSentinelURL(raw string) (sentinelURL, error) {
	var s sentinelURL
	scheme, rest, _ := strings.Cut(raw, "://")
	s.tls = scheme == SentinelTLSScheme
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		return s, fmt.Errorf("redis sentinel url: parameters (%q) are not supported; %s", rest[i:i+1], sentinelHelp)
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		userinfo := hosts[:at]
		hosts = hosts[at+1:]
		user, pw, _ := strings.Cut(userinfo, ":")
		var err error
		if s.username, err = url.PathUnescape(user); err != nil {
			return s, fmt.Errorf("redis sentinel url: the user name does not parse; %s", sentinelHelp)
		}
		if s.password, err = url.PathUnescape(pw); err != nil {
			return s, fmt.Errorf("redis sentinel url: the password does not parse (escape it with %%XX); %s", sentinelHelp)
		}
	}
	addrs, err := parseSentinelAddrs(hosts)
	if err != nil {
		return s, err
	}
	s.addrs = addrs
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if parts[0] == "" {
		return s, fmt.Errorf("redis sentinel url names no master: the Sentinels watch primaries by name; %s", sentinelHelp)
	}
	if s.master, err = url.PathUnescape(parts[0]); err != nil {
		return s, fmt.Errorf("redis sentinel url: master name %q does not parse; %s", parts[0], sentinelHelp)
	}
	switch len(parts) {
	case 1:
	case 2:
		if s.db, err = strconv.Atoi(parts[1]); err != nil || s.db < 0 {
			return s, fmt.Errorf("redis sentinel url: database %q is not a whole number; %s", parts[1], sentinelHelp)
		}
	default:
		return s, fmt.Errorf("redis sentinel url: path /%s has more than a master name and a database; %s", strings.Trim(path, "/"), sentinelHelp)
	}
	return s, nil
}

// parseSentinelAddrs checks a comma-separated list of Sentinel host:port addresses.
func parseSentinelAddrs(list string) ([]string, error) {
	addrs := ParseClusterAddrs(list)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("redis sentinel: no Sentinel address; %s", sentinelHelp)
	}
	for _, a := range addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("redis sentinel: %q is not host:port; %s", a, sentinelHelp)
		}
	}
	return addrs, nil
}

// failoverOptions is the go-redis failover client cfg asks for: cfg's Sentinels and master
// (from its URL when it is a Sentinel URL), passwords, TLS and bounded timeouts.
func (cfg Config) failoverOptions() (*redis.FailoverOptions, error) {
	s := sentinelURL{master: cfg.MasterName, db: cfg.DB}
	if IsSentinelURL(cfg.URL) {
		var err error
		if s, err = parseSentinelURL(cfg.URL); err != nil {
			return nil, err
		}
	} else {
		addrs, err := parseSentinelAddrs(strings.Join(cfg.SentinelAddrs, ","))
		if err != nil {
			return nil, err
		}
		s.addrs = addrs
		if strings.TrimSpace(s.master) == "" {
			return nil, fmt.Errorf("redis sentinel: Sentinels %s given without the name of the primary they watch; %s",
				strings.Join(addrs, ","), sentinelHelp)
		}
	}
	if s.password == "" {
		s.password = cfg.Password
	}
	tlsCfg, err := cfg.TLS.tlsConfig(nil)
	if err != nil {
		return nil, err
	}
	if s.tls && tlsCfg == nil {
		tlsCfg, _ = TLS{Enabled: true}.tlsConfig(nil)
	}
	return &redis.FailoverOptions{
		MasterName:       s.master,
		SentinelAddrs:    s.addrs,
		SentinelPassword: cfg.SentinelPassword,
		Username:         s.username,
		Password:         s.password,
		DB:               s.db,
		PoolSize:         cfg.PoolSize,
		TLSConfig:        tlsCfg,
		DialTimeout:      cfg.Timeout,
		ReadTimeout:      cfg.Timeout,
		WriteTimeout:     cfg.Timeout,
		PoolTimeout:      cfg.Timeout,
		MaxRetries:       -1,
	}, nil
}

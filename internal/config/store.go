package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// StoreURL is a Redis server, as rate_limit.store and tls.acme.storage
// name it: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss:// for
// TLS (the server's certificate checked against the system's roots for
// HOST).
type StoreURL struct {
	// TLS says rediss://.
	TLS bool
	// Addr is HOST:PORT; the port defaults to 6379.
	Addr string
	// Host is HOST, the name TLS checks the certificate against.
	Host string
	// DB is the database number, 0 by default.
	DB int
	// Username and Password authenticate (AUTH); both empty: none.
	Username, Password string
}

// IsStoreURL reports whether s names a Redis server (redis:// or
// rediss://) rather than a directory.
func IsStoreURL(s string) bool {
	return strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://")
}

// storeAllowed is the "what is allowed" part of store URL problems.
const storeAllowed = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS, such as redis://redis:6379/0"

// ParseStoreURL reads a Redis URL. The password may come from the
// environment with ${VAR} (percent-encode what is not allowed in a URL)
// or from a *_password_env key, which replaces it.
func ParseStoreURL(s string) (StoreURL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return StoreURL{}, fmt.Errorf("not a URL (%s)", storeAllowed)
	}
	var st StoreURL
	switch u.Scheme {
	case "redis":
	case "rediss":
		st.TLS = true
	default:
		return StoreURL{}, fmt.Errorf("scheme %q is not redis or rediss (%s)", u.Scheme, storeAllowed)
	}
	if u.Opaque != "" || u.Host == "" {
		return StoreURL{}, fmt.Errorf("no host (%s)", storeAllowed)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return StoreURL{}, fmt.Errorf("a query or fragment is not allowed (%s)", storeAllowed)
	}
	st.Host = u.Hostname()
	port := u.Port()
	if port == "" {
		port = "6379"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return StoreURL{}, fmt.Errorf("port %q is out of range (1-65535)", port)
	}
	if st.Host == "" {
		return StoreURL{}, fmt.Errorf("no host (%s)", storeAllowed)
	}
	st.Addr = net.JoinHostPort(st.Host, port)
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || n > 1<<20 {
			return StoreURL{}, fmt.Errorf("database %q is not a number (the path is /DB, such as /0)", db)
		}
		st.DB = n
	}
	if u.User != nil {
		st.Username = u.User.Username()
		st.Password, _ = u.User.Password()
	}
	return st, nil
}

// Redacted returns the URL without its password, for logs and metrics.
func (s StoreURL) Redacted() string {
	scheme := "redis://"
	if s.TLS {
		scheme = "rediss://"
	}
	return scheme + s.Addr + "/" + strconv.Itoa(s.DB)
}

// store checks a Redis URL at path p and the environment variable
// named at passwordPath (a *_password_env key), filling *password from
// it.
func (v *validator) store(p, s, passwordPath, env string, password *string) {
	if _, err := ParseStoreURL(s); err != nil {
		v.addf(p, "%q: %v", redactURL(s), err)
	}
	if env == "" {
		return
	}
	if !isEnvName(env) {
		v.addf(passwordPath, "%q is not an environment variable's name (letters, digits and _)", env)
		return
	}
	val, ok := v.lookupEnv(env)
	if !ok || val == "" {
		v.addf(passwordPath, "the environment variable %s is not set (it holds the Redis password)", env)
		return
	}
	*password = val
}

// redactURL hides the password of a URL in a problem.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

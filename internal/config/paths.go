package config

import "path/filepath"

// resolvePaths makes the relative file paths of c (static roots, the
// access log, certificates, keys, CA files, backends files and basic_auth
// users files) relative to
// dir, the directory of the configuration file, as nginx does with its
// prefix and Caddy with its config's directory: a config then means the
// same thing whatever directory the process starts in (systemd starts
// services in /, a container in its WORKDIR). Absolute paths, and the
// special values of logging.access_log, are kept. It runs before
// validation, so problems name the path that was looked up.
func (c *Config) resolvePaths(dir string) {
	for i := range c.Routes {
		if s := c.Routes[i].Static; s != nil && s.Root != "" {
			s.Root = resolvePath(dir, s.Root)
		}
		if b := c.Routes[i].BasicAuth; b != nil {
			resolveAll(dir, &b.UsersFile)
		}
	}
	for i := range c.Listeners {
		if t := c.Listeners[i].TLS; t != nil {
			resolveAll(dir, &t.CertFile, &t.KeyFile, &t.ClientCAFile)
			for j := range t.Certificates {
				resolveAll(dir, &t.Certificates[j].CertFile, &t.Certificates[j].KeyFile)
			}
			if a := t.ACME; a != nil {
				resolveAll(dir, &a.CARoot)
				if !IsStoreURL(a.Storage) {
					resolveAll(dir, &a.Storage)
				}
			}
		}
	}
	for i := range c.Upstreams {
		if t := c.Upstreams[i].Transport.TLS; t != nil {
			resolveAll(dir, &t.CAFile, &t.CertFile, &t.KeyFile)
		}
		resolveAll(dir, &c.Upstreams[i].BackendsFile)
	}
	switch c.Logging.AccessLog {
	case "", AccessLogOff, AccessLogStdout, AccessLogStderr:
	default:
		c.Logging.AccessLog = resolvePath(dir, c.Logging.AccessLog)
	}
}

// resolveAll resolves each non-empty path against dir.
func resolveAll(dir string, ps ...*string) {
	for _, p := range ps {
		if *p != "" {
			*p = resolvePath(dir, *p)
		}
	}
}

// resolvePath returns p joined to dir when p is relative, and p itself
// when it is absolute.
func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

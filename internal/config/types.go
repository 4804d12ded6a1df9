// Package config defines Helios's YAML configuration: the structs, their
// defaults, strict decoding with line numbers, and validation that reports
// every problem at once as FILE:LINE: key.path: what is wrong (what is allowed).
//
// The package holds data only; internal/server turns a Config into running
// objects.
package config

import "time"

// Config is a whole Helios configuration file.
type Config struct {
	Listeners []Listener `yaml:"listeners"`
	Routes    []Route    `yaml:"routes"`
	Upstreams []Upstream `yaml:"upstreams"`
	Admin     Admin      `yaml:"admin"`
	Logging   Logging    `yaml:"logging"`

	// File is the path the configuration was read from ("" when parsed
	// from memory). Not a YAML key.
	File string `yaml:"-"`
}

// Listener is one listening address served by a pool of SO_REUSEPORT sockets.
type Listener struct {
	Name              string   `yaml:"name"`
	Address           string   `yaml:"address"`
	Sockets           int      `yaml:"sockets"`             // default: number of CPUs
	Backlog           int      `yaml:"backlog"`             // default 4096
	MaxConnections    int      `yaml:"max_connections"`     // default 20000; 0 after defaults never happens
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"` // default 10s
	ReadTimeout       Duration `yaml:"read_timeout"`        // default 0: none (whole request incl. body)
	WriteTimeout      Duration `yaml:"write_timeout"`       // default 0: none
	IdleTimeout       Duration `yaml:"idle_timeout"`        // default 60s
	MaxHeaderBytes    int      `yaml:"max_header_bytes"`    // default 65536
}

// Route maps matching requests to exactly one action: Upstream, Respond or Static.
type Route struct {
	Name     string   `yaml:"name"`
	Match    Match    `yaml:"match"`
	Upstream string   `yaml:"upstream"`
	Respond  *Respond `yaml:"respond"`
	Static   *Static  `yaml:"static"`
}

// Match selects requests by host and path. Empty fields match everything.
type Match struct {
	Host       string `yaml:"host"`        // exact, "*.example.com", or "*"
	Path       string `yaml:"path"`        // exact path
	PathPrefix string `yaml:"path_prefix"` // prefix of the path
}

// Respond is a fixed answer, like nginx's `return`.
type Respond struct {
	Status  int               `yaml:"status"` // default 200
	Body    string            `yaml:"body"`
	Headers map[string]string `yaml:"headers"`
}

// Static serves files from a directory.
type Static struct {
	Root        string `yaml:"root"`
	Index       string `yaml:"index"`        // default "index.html"
	StripPrefix string `yaml:"strip_prefix"` // removed from the path before joining to root
}

// Upstream is a named pool of backends with a balancing strategy.
type Upstream struct {
	Name           string          `yaml:"name"`
	Strategy       string          `yaml:"strategy"` // default round_robin
	Backends       []Backend       `yaml:"backends"`
	Transport      Transport       `yaml:"transport"`
	HealthCheck    *HealthCheck    `yaml:"health_check"`
	Passive        *Passive        `yaml:"passive"`
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker"`
	Retries        *Retries        `yaml:"retries"`
}

// Backend is one origin server.
type Backend struct {
	Address string `yaml:"address"`
	Weight  int    `yaml:"weight"` // default 1
}

// Transport tunes the keep-alive connections to an upstream's backends.
type Transport struct {
	MaxIdlePerBackend     int      `yaml:"max_idle_per_backend"`    // default 256
	IdleTimeout           Duration `yaml:"idle_timeout"`            // default 90s
	DialTimeout           Duration `yaml:"dial_timeout"`            // default 2s
	ResponseHeaderTimeout Duration `yaml:"response_header_timeout"` // default 30s
}

// HealthCheck configures active health checks.
type HealthCheck struct {
	Path         string   `yaml:"path"`          // default /healthz
	Interval     Duration `yaml:"interval"`      // default 2s
	Timeout      Duration `yaml:"timeout"`       // default 1s
	Fails        int      `yaml:"fails"`         // default 2
	Passes       int      `yaml:"passes"`        // default 2
	ExpectStatus string   `yaml:"expect_status"` // default "200-399"
}

// Passive configures passive ejection on observed failures.
type Passive struct {
	MaxFails    int      `yaml:"max_fails"`     // default 3
	FailWindow  Duration `yaml:"fail_window"`   // default 10s
	EjectFor    Duration `yaml:"eject_for"`     // default 30s
	MaxEjectFor Duration `yaml:"max_eject_for"` // default 300s: cap for repeated ejections
}

// CircuitBreaker configures the per-backend breaker.
type CircuitBreaker struct {
	ConsecutiveFailures int      `yaml:"consecutive_failures"` // default 5
	FailureRatio        float64  `yaml:"failure_ratio"`        // default 0.5
	MinRequests         int      `yaml:"min_requests"`         // default 20
	Interval            Duration `yaml:"interval"`             // default 10s: window for the ratio
	OpenFor             Duration `yaml:"open_for"`             // default 10s
	HalfOpenRequests    int      `yaml:"half_open_requests"`   // default 1
}

// Retries configures retrying a failed request on another backend.
type Retries struct {
	Attempts       int      `yaml:"attempts"`        // default 2 (tries after the first)
	On             []string `yaml:"on"`              // default [connect_error, "502", "503", "504"]
	IdempotentOnly *bool    `yaml:"idempotent_only"` // default true
	BudgetRatio    float64  `yaml:"budget_ratio"`    // default 0.2
}

// Admin configures the admin listener.
type Admin struct {
	Address string `yaml:"address"` // default 127.0.0.1:9901; "off" disables
	Token   string `yaml:"token"`
	Pprof   bool   `yaml:"pprof"`
}

// Logging configures the process log and the access log.
type Logging struct {
	Level     string `yaml:"level"`      // debug | info | warn | error; default info
	Format    string `yaml:"format"`     // json | console; default json
	AccessLog string `yaml:"access_log"` // off | stdout | stderr | FILE; default off
}

// Duration is a time.Duration written in YAML as a Go duration string ("2s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

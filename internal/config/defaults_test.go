package config

import (
	"testing"
	"time"
)

// TestSetDefaultsInCode checks SetDefaults and Validate on a Config built in
// code, where zero means absent and problems have no line.
func TestSetDefaultsInCode(t *testing.T) {
	c := &Config{
		Listeners: []Listener{{Name: "web", Address: ":80", Backlog: 128}},
		Routes:    []Route{{Name: "r", Upstream: "app"}},
		Upstreams: []Upstream{{
			Name:           "app",
			Backends:       []Backend{{Address: "10.0.0.1:80"}, {Address: "10.0.0.2:80", Weight: 5}},
			CircuitBreaker: &CircuitBreaker{},
			Retries:        &Retries{Attempts: 1},
		}},
	}
	SetDefaults(c)
	SetDefaults(c) // a second call changes nothing
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"set backlog kept", c.Listeners[0].Backlog, 128},
		{"zero sockets defaulted", c.Listeners[0].Sockets, testNumCPU()},
		{"zero weight defaulted", c.Upstreams[0].Backends[0].Weight, 1},
		{"set weight kept", c.Upstreams[0].Backends[1].Weight, 5},
		{"breaker defaulted", c.Upstreams[0].CircuitBreaker.ConsecutiveFailures, 5},
		{"no health check stays nil", c.Upstreams[0].HealthCheck == nil, true},
		{"set attempts kept", c.Upstreams[0].Retries.Attempts, 1},
		{"retry conditions defaulted", len(c.Upstreams[0].Retries.On), 5},
		{"idempotent defaulted", *c.Upstreams[0].Retries.IdempotentOnly, true},
		{"dial timeout defaulted", c.Upstreams[0].Transport.DialTimeout.D(), 2 * time.Second},
		{"admin defaulted", c.Admin.Address, "127.0.0.1:9901"},
		{"access log defaulted", c.Logging.AccessLog, "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: got %v, want nil", err)
	}

	c.File = "built.yaml"
	c.Upstreams[0].Backends[1].Weight = 0
	c.Logging.AccessLog = ""
	want := "built.yaml: logging.access_log: missing (off, stdout, stderr, or a file path)\n" +
		"built.yaml: upstreams[0].backends[1].weight: 0 is out of range (1-1000)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("got %v, want %v", err, want)
	}
}

// TestValidateWithoutDefaults checks that Validate reports what SetDefaults
// would have filled, rather than accept it.
func TestValidateWithoutDefaults(t *testing.T) {
	c := &Config{
		Listeners:      []Listener{{Name: "web", Address: ":80", Sockets: 1, Backlog: 1, MaxConnections: 1, MaxHeaderBytes: 1024, MaxHeaderCount: 1, MaxMethodBytes: 1, OutputBufferBytes: 4096, Poller: PollerNative}},
		Routes:         []Route{{Name: "r", Respond: &Respond{Status: 200}}},
		Admin:          Admin{Address: "off"},
		Logging:        Logging{Level: "info", Format: "json", AccessLog: "stderr"},
		Discovery:      Discovery{Timeout: Duration(time.Second), MinRefresh: Duration(time.Second), FileRefresh: Duration(time.Second)},
		RequestBuffers: RequestBuffers{ConnectionBytes: 65536},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	c.Logging.Level = ""
	want := `logging.level: "" is not a level (debug, info, warn, error)`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("got %v, want %v", err, want)
	}
}

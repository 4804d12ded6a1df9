package config

import (
	"reflect"
	"testing"
)

// tracingHead starts the configs of the tracing tests.
const tracingHead = `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {status: 200}}]
`

// TestParseTracingDefaults: an empty tracing block gets the documented
// defaults (OTLP/gRPC to a local collector, every trace Helios decides on,
// following the caller, W3C); no block is no tracing.
func TestParseTracingDefaults(t *testing.T) {
	if cfg := mustParse(t, tracingHead, nil); cfg.Tracing != nil {
		t.Errorf("no tracing block: got %+v, want nil", cfg.Tracing)
	}
	cfg := mustParse(t, tracingHead+"tracing: {}\n", nil)
	want := Tracing{Endpoint: "http://127.0.0.1:4317", Protocol: "grpc", SampleRatio: 1, ParentBased: true, ServiceName: "helios", Propagation: []string{"w3c"}}
	if !reflect.DeepEqual(*cfg.Tracing, want) {
		t.Errorf("got %+v, want %+v", *cfg.Tracing, want)
	}
	cfg = mustParse(t, tracingHead+"tracing: {protocol: http, sample_ratio: 0, parent_based: false, propagation: [b3, w3c], headers: {x-api-key: k}}\n", nil)
	want = Tracing{Endpoint: "http://127.0.0.1:4318/v1/traces", Protocol: "http", ServiceName: "helios", Propagation: []string{"b3", "w3c"}, Headers: map[string]string{"x-api-key": "k"}}
	if !reflect.DeepEqual(*cfg.Tracing, want) {
		t.Errorf("got %+v, want %+v", *cfg.Tracing, want)
	}
}

// TestParseTracingProblem checks the message and line of each problem
// the tracing keys can have. Each config holds exactly one.
func TestParseTracingProblem(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"endpoint without scheme", "tracing:\n  endpoint: 127.0.0.1:4317\n",
			`t.yaml:4: tracing.endpoint: "127.0.0.1:4317" is not an http:// or https:// URL with a host and a port (a URL such as http://127.0.0.1:4317 or https://collector.example:4318/v1/traces)`},
		{"endpoint without port", "tracing:\n  endpoint: http://collector\n",
			`t.yaml:4: tracing.endpoint: "http://collector" is not an http:// or https:// URL with a host and a port (a URL such as http://127.0.0.1:4317 or https://collector.example:4318/v1/traces)`},
		{"endpoint port out of range", "tracing:\n  endpoint: http://collector:70000\n",
			`t.yaml:4: tracing.endpoint: "http://collector:70000" has port 70000, out of range (a URL such as http://127.0.0.1:4317 or https://collector.example:4318/v1/traces)`},
		{"grpc endpoint with a path", "tracing:\n  endpoint: http://collector:4317/v1/traces\n",
			`t.yaml:4: tracing.endpoint: "http://collector:4317/v1/traces" has a path, which OTLP/gRPC does not use (a URL such as http://127.0.0.1:4317 or https://collector.example:4318/v1/traces)`},
		{"protocol", "tracing:\n  protocol: thrift\n",
			`t.yaml:4: tracing.protocol: "thrift" is not a protocol (grpc, http)`},
		{"sample ratio", "tracing:\n  sample_ratio: 1.5\n",
			`t.yaml:4: tracing.sample_ratio: 1.5 is out of range (0-1; 0 records only what callers sampled)`},
		{"header name", "tracing:\n  headers: {\"bad name\": x}\n",
			`t.yaml:4: tracing.headers["bad name"]: "bad name" is not a header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`},
		{"service name", "tracing:\n  service_name: \" \"\n",
			`t.yaml:4: tracing.service_name: missing (a name such as helios)`},
		{"no propagation", "tracing:\n  propagation: []\n",
			`t.yaml:4: tracing.propagation: empty (w3c, b3, or both)`},
		{"unknown format", "tracing:\n  propagation: [w3c, jaeger]\n",
			`t.yaml:4: tracing.propagation[1]: "jaeger" is not a format (w3c, b3)`},
		{"format twice", "tracing:\n  propagation: [b3, b3]\n",
			`t.yaml:4: tracing.propagation[1]: "b3" is listed twice`},
		{"unknown key", "tracing:\n  sampler: always\n",
			`t.yaml:4: tracing.sampler: unknown key (allowed: endpoint, protocol, sample_ratio, parent_based, headers, service_name, propagation)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tracingHead+tt.yaml, nil)
			if got := ps.Error(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

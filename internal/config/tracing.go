package config

import (
	"net/url"
	"slices"
	"strings"
)

// The values of Tracing.Protocol and Tracing.Propagation.
const (
	TracingGRPC = "grpc"
	TracingHTTP = "http"
	TracingW3C  = "w3c"
	TracingB3   = "b3"
)

// Tracing exports an OpenTelemetry trace of requests to an OTLP
// collector: a server span per request and a client span per attempt,
// joined to the trace the client started (or starting one), with the
// context handed to the backends. A reload changes every key without a
// restart.
type Tracing struct {
	// Endpoint is the collector's URL: http:// (cleartext) or https://
	// (TLS, checked against the system's roots), a host and a port; for
	// protocol http, the path spans are posted to (none: /v1/traces).
	// Default http://127.0.0.1:4317 for grpc, http://127.0.0.1:4318/v1/traces
	// for http.
	Endpoint string `yaml:"endpoint"`
	// Protocol is how spans go to the collector: grpc (OTLP/gRPC) or
	// http (OTLP/HTTP, protobuf). Default grpc.
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of the traces Helios decides on that are
	// recorded, 0-1, by the trace id (OpenTelemetry's TraceIDRatioBased,
	// so services sampling the same ratio agree). 0 records only what
	// callers sampled (with parent_based). Default 1.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ParentBased follows the caller's sampling decision when a request
	// carries one; false decides every request by sample_ratio. Default
	// true.
	ParentBased bool `yaml:"parent_based"`
	// Headers go with every export (an API key of a hosted collector);
	// names are HTTP tokens. Default none.
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the spans' service.name. Default helios.
	ServiceName string `yaml:"service_name"`
	// Propagation lists the context formats read from requests, the
	// first found winning, and all written to backends: w3c (W3C Trace
	// Context: traceparent, tracestate) and b3 (Zipkin's; read as the b3
	// field or X-B3-*, written as X-B3-*). Default [w3c].
	Propagation []string `yaml:"propagation"`
}

// setTracingDefaults fills the absent keys of a tracing block.
func setTracingDefaults(m *meta, t *Tracing) {
	if t == nil {
		return
	}
	setString(&t.Protocol, TracingGRPC)
	if t.Protocol == TracingHTTP {
		setString(&t.Endpoint, "http://127.0.0.1:4318/v1/traces")
	} else {
		setString(&t.Endpoint, "http://127.0.0.1:4317")
	}
	setDefault(m, "tracing.sample_ratio", &t.SampleRatio, 1)
	setDefault(m, "tracing.parent_based", &t.ParentBased, true)
	setString(&t.ServiceName, "helios")
	if absent(m, "tracing.propagation", t.Propagation == nil) {
		t.Propagation = []string{TracingW3C}
	}
}

// tracing checks the tracing block.
func (v *validator) tracing(t *Tracing) {
	if t == nil {
		return
	}
	const endpointAllowed = "a URL such as http://127.0.0.1:4317 or https://collector.example:4318/v1/traces"
	if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		v.addf("tracing.endpoint", "%q is not an http:// or https:// URL with a host and a port (%s)", t.Endpoint, endpointAllowed)
	} else if p := hostPortError(u.Host); p != "" {
		v.addf("tracing.endpoint", "%q %s (%s)", t.Endpoint, p, endpointAllowed)
	} else if t.Protocol == TracingGRPC && u.Path != "" && u.Path != "/" {
		v.addf("tracing.endpoint", "%q has a path, which OTLP/gRPC does not use (%s)", t.Endpoint, endpointAllowed)
	}
	if t.Protocol != TracingGRPC && t.Protocol != TracingHTTP {
		v.addf("tracing.protocol", "%q is not a protocol (grpc, http)", t.Protocol)
	}
	v.ratio("tracing.sample_ratio", t.SampleRatio, "0 records only what callers sampled")
	v.headers("tracing.headers", t.Headers)
	if strings.TrimSpace(t.ServiceName) == "" {
		v.addf("tracing.service_name", "missing (a name such as helios)")
	}
	if len(t.Propagation) == 0 {
		v.addf("tracing.propagation", "empty (w3c, b3, or both)")
	}
	for i, f := range t.Propagation {
		p := indexPath("tracing.propagation", i)
		switch {
		case f != TracingW3C && f != TracingB3:
			v.addf(p, "%q is not a format (w3c, b3)", f)
		case slices.Index(t.Propagation, f) < i:
			v.addf(p, "%q is listed twice", f)
		}
	}
}

// Package tracing is the part of distributed tracing that runs on the
// request path: trace and span ids, the W3C Trace Context and B3 headers
// read from a request and written for a backend, and the sampling
// decision. Everything here is allocation-free, so tracing costs a request
// that is not sampled a few hundred nanoseconds and no garbage; only a
// sampled request collects its attempts (Attempt) for the exporter
// (internal/tracing/otlp), which builds OpenTelemetry spans off the event
// loops.
//
// The pipeline (internal/proxy) reads the caller's context with
// Policy.Extract, decides with Policy.Sample (a ratio on the trace id, as
// OpenTelemetry's TraceIDRatioBased, optionally following the caller's
// decision), and before each attempt writes the context with the
// attempt's span as parent into the request head with Policy.Inject.
package tracing

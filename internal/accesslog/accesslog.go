// Package accesslog writes one line per request: time, client, method,
// host, path, status, bytes, duration, route, upstream, backend. Every
// request is logged (no sampling).
package accesslog

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// Logger is a proxy.Recorder that writes access log lines.
type Logger struct {
	log *zap.Logger
}

// New returns an access logger writing to core.
func New(core zapcore.Core) *Logger {
	return &Logger{log: zap.New(core)}
}

// Record writes the line for one request. Byte-slice fields are encoded
// straight from the connection buffer, without building strings.
func (l *Logger) Record(ex wire.Exchange, r proxy.Record) {
	ce := l.log.Check(zapcore.InfoLevel, "request")
	if ce == nil {
		return
	}
	route, up, backend := "", "", ""
	if r.Route != nil {
		route = r.Route.Name
	}
	if r.Upstream != nil {
		up = r.Upstream.Name
	}
	if r.Backend != nil {
		backend = r.Backend.Addr
	}
	fields := [...]zap.Field{
		zap.String("client", ex.ClientAddr().String()),
		zap.ByteString("method", ex.Method()),
		zap.ByteString("host", ex.Host()),
		zap.ByteString("path", ex.Path()),
		zap.Int("status", r.Status),
		zap.Int64("bytes", r.Bytes),
		zap.Duration("duration", r.Duration),
		zap.String("route", route),
		zap.String("upstream", up),
		zap.String("backend", backend),
		zap.Int("attempts", r.Attempts),
	}
	if r.Err != nil {
		ce.Write(append(fields[:], zap.String("error", r.Err.Error()))...)
		return
	}
	ce.Write(fields[:]...)
}

package accesslog

import (
	"strconv"
	"unicode/utf8"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// appendFields writes the record's JSON fields after the time, without
// the closing brace.
func appendFields(b []byte, ex wire.Exchange, r *proxy.Record) []byte {
	query, proto, ua, referer := ex.Query(), ex.Proto(), ex.Header("User-Agent"), ex.Header("Referer")
	b = append(b, `"client":"`...)
	b = ex.ClientAddr().AppendTo(b)
	b = append(b, `","method":"`...)
	b = appendEscaped(b, ex.Method())
	b = append(b, `","host":"`...)
	b = appendEscaped(b, ex.Host())
	b = append(b, `","path":"`...)
	b = appendEscaped(b, ex.Path())
	b = append(b, `","query":"`...)
	b = appendEscaped(b, query)
	b = append(b, `","proto":"`...)
	b = appendEscaped(b, proto)
	if v := ex.TLSVersion(); v != nil {
		b = append(b, `","tls":"`...)
		b = append(b, v...)
	}
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendFloat(b, r.Duration.Seconds(), 'f', -1, 64)
	b = append(b, `,"route":"`...)
	if r.Route != nil {
		b = appendEscapedString(b, r.Route.Name)
	}
	b = append(b, `","upstream":"`...)
	if r.Upstream != nil {
		b = appendEscapedString(b, r.Upstream.Name)
	}
	b = append(b, `","backend":"`...)
	if r.Backend != nil {
		b = appendEscapedString(b, r.Backend.Addr)
	}
	b = append(b, `","attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"queue_time":`...)
	b = strconv.AppendFloat(b, r.Timing.Queue.Seconds(), 'f', -1, 64)
	b = append(b, `,"connect_time":`...)
	b = strconv.AppendFloat(b, r.Timing.Connect.Seconds(), 'f', -1, 64)
	b = append(b, `,"first_byte_time":`...)
	b = strconv.AppendFloat(b, r.Timing.FirstByte.Seconds(), 'f', -1, 64)
	b = append(b, `,"user_agent":"`...)
	b = appendEscaped(b, ua)
	b = append(b, `","referer":"`...)
	b = appendEscaped(b, referer)
	b = append(b, `","request_id":"`...)
	b = appendEscaped(b, r.RequestID.Bytes())
	b = append(b, '"')
	if r.Trace.On() {
		b = append(b, `,"trace_id":"`...)
		b = r.Trace.TraceID.AppendHex(b)
		b = append(b, `","span_id":"`...)
		b = r.Trace.SpanID.AppendHex(b)
		b = append(b, `","sampled":`...)
		b = strconv.AppendBool(b, r.Trace.Sampled)
	}
	if r.Err != nil {
		b = append(b, `,"error":"`...)
		b = appendEscapedString(b, r.Err.Error())
		b = append(b, '"')
	}
	return b
}

// appendCombined writes what follows the time in nginx's combined
// format: "METHOD URI PROTO" STATUS BYTES "REFERER" "USER_AGENT". nginx
// writes $body_bytes_sent and "-" for an absent referer or user agent;
// a request whose protocol the engine does not tell is written without
// one, as nginx writes an HTTP/0.9 request line.
func appendCombined(b []byte, ex wire.Exchange, r *proxy.Record) []byte {
	query, proto, ua, referer := ex.Query(), ex.Proto(), ex.Header("User-Agent"), ex.Header("Referer")
	b = append(b, '"')
	b = appendNginxEscaped(b, ex.Method())
	b = append(b, ' ')
	b = appendNginxEscaped(b, ex.Path())
	if len(query) > 0 {
		b = append(b, '?')
		b = appendNginxEscaped(b, query)
	}
	if len(proto) > 0 {
		b = append(b, ' ')
		b = appendNginxEscaped(b, proto)
	}
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, ` "`...)
	b = appendOrDash(b, referer)
	b = append(b, `" "`...)
	b = appendOrDash(b, ua)
	return append(b, '"')
}

func appendOrDash(b, v []byte) []byte {
	if len(v) == 0 {
		return append(b, '-')
	}
	return appendNginxEscaped(b, v)
}

const hexDigits = "0123456789abcdef"

// appendNginxEscaped writes p as nginx's default log escaping does: '"',
// '\' and bytes outside printable ASCII become \xHH, so a hostile header
// can neither end a field nor start a line.
func appendNginxEscaped(b, p []byte) []byte {
	for _, c := range p {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}

// appendEscaped writes p as the inside of a JSON string: quotes,
// backslashes and control characters escaped, invalid UTF-8 replaced by
// U+FFFD (as zap does), so a hostile path cannot break a line.
func appendEscaped(b, p []byte) []byte {
	for i := 0; i < len(p); {
		c := p[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, p[i:i+size]...)
		}
		i += size
	}
	return b
}

func appendEscapedString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return appendEscaped(b, []byte(s))
		}
	}
	return append(b, s...)
}

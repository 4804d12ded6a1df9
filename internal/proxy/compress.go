package proxy

import (
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// Compression: a route's compress.Policy applied to its answers, the
// backend's (or in-process handler's) when Forwarded hands it to the
// engine, a file's when it is planned. The policy decides from the
// request and the answer's head and marks the head; the engine runs the
// body through the encoder (wire.Exchange.TransformBody).

// send asks the engine to send the answer Forwarded reported, compressed
// when the route says so.
func (f *flow) send() wire.Action {
	if rt := f.rec.Route; rt != nil && rt.Compress != nil {
		if r := f.ex.Response(); r != nil {
			length := r.ContentLength
			if httpmsg.EqualFold(f.ex.Method(), "head") {
				// The length GET would get, which the policy weighs.
				length = contentLength(&r.Header)
			}
			if e := rt.Compress.Apply(f.ex.Request(), r.Status, &r.Header, length, f.ex); e != nil {
				f.ex.TransformBody(e)
			}
		}
	}
	f.last = wire.ActSend
	return wire.ActSend
}

// PlanFile plans a file answer with the route's planner and compresses
// it as the route says (wire.Files: the flow is the planner of a route
// that compresses). A planner's own short texts (errors, redirects) go
// as they are.
func (f *flow) PlanFile(loop int, ex wire.Exchange, a *wire.FileAnswer) {
	rt := f.rec.Route
	rt.Files.PlanFile(loop, ex, a)
	if a.File == nil && a.Body != nil {
		return
	}
	length := a.Length
	if a.File == nil {
		// HEAD (or an empty range): the length GET would send.
		length = contentLength(&a.Header)
	}
	if e := rt.Compress.Apply(ex.Request(), a.Status, &a.Header, length, ex); e != nil {
		ex.TransformBody(e)
	}
}

var _ wire.Files = (*flow)(nil)

// contentLength returns the value of h's Content-Length, -1 when it has
// none that reads as a length.
func contentLength(h *httpmsg.Header) int64 {
	v, ok := h.GetKind(httpmsg.KindContentLength)
	if !ok || len(v) == 0 || len(v) > 18 {
		return -1
	}
	var n int64
	for _, d := range v {
		if d < '0' || d > '9' {
			return -1
		}
		n = n*10 + int64(d-'0')
	}
	return n
}

// Package wiretest is a wire.Exchange for tests of what reads finished
// requests (recorders, exporters): a plain struct whose fields say what
// the exchange answers.
package wiretest

import (
	"net/netip"
	"strings"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// Exchange is a request as the pipeline sees it. The zero value is a
// request with nothing set; Headers is looked up without case.
type Exchange struct {
	MethodV, HostV, PathV, QueryV, ProtoV, TLSV []byte
	Client                                      netip.Addr
	Headers                                     map[string][]byte
	Req                                         httpmsg.Request
	Resp                                        *httpmsg.Response
	Time                                        wire.Timing
	ListenerV                                   *wire.Listener
}

var _ wire.Exchange = (*Exchange)(nil)

// Method returns MethodV.
func (e *Exchange) Method() []byte { return e.MethodV }

// Host returns HostV.
func (e *Exchange) Host() []byte { return e.HostV }

// Path returns PathV.
func (e *Exchange) Path() []byte { return e.PathV }

// ClientAddr returns Client.
func (e *Exchange) ClientAddr() netip.Addr { return e.Client }

// HasBody returns false.
func (e *Exchange) HasBody() bool { return false }

// BodyStarted returns false.
func (e *Exchange) BodyStarted() bool { return false }

// Upgrade returns nil.
func (e *Exchange) Upgrade() []byte { return nil }

// RefuseUpgrade does nothing.
func (e *Exchange) RefuseUpgrade() {}

// BodyLength returns 0.
func (e *Exchange) BodyLength() int64 { return 0 }

// BodyRead returns 0.
func (e *Exchange) BodyRead() int64 { return 0 }

// LimitBody does nothing.
func (e *Exchange) LimitBody(int64) {}

// Respond does nothing.
func (e *Exchange) Respond(int, *httpmsg.Header, []byte) error { return nil }

// Query returns QueryV.
func (e *Exchange) Query() []byte { return e.QueryV }

// Proto returns ProtoV.
func (e *Exchange) Proto() []byte { return e.ProtoV }

// TLSVersion returns TLSV.
func (e *Exchange) TLSVersion() []byte { return e.TLSV }

// Header returns Headers[name], looked up without case; nil when absent.
func (e *Exchange) Header(name string) []byte {
	for k, v := range e.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// Request returns &Req.
func (e *Exchange) Request() *httpmsg.Request { return &e.Req }

// Response returns Resp.
func (e *Exchange) Response() *httpmsg.Response { return e.Resp }

// BodyHeld returns no body, held.
func (e *Exchange) BodyHeld() ([]byte, bool) { return nil, true }

// Alloc returns n new bytes.
func (e *Exchange) Alloc(n int) []byte { return make([]byte, n) }

// Timing returns Time.
func (e *Exchange) Timing() wire.Timing { return e.Time }

// Listener returns ListenerV.
func (e *Exchange) Listener() *wire.Listener { return e.ListenerV }

// Waker returns a function that does nothing.
func (e *Exchange) Waker() func() { return func() {} }

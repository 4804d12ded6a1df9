package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/helios-lb/helios/internal/wire"
)

// requestIDLen is the length of a request id the pipeline makes: 32 hex
// digits, the shape of nginx's $request_id.
const requestIDLen = 32

// maxClientRequestID bounds an X-Request-Id taken from a client; a
// longer one is replaced.
const maxClientRequestID = 200

// RequestID is a request's id. A made id is held by value, so that a
// Record passed through Recorder allocates nothing; the zero RequestID is
// empty.
type RequestID struct {
	client []byte // the client's X-Request-Id, valid while the exchange is
	made   [requestIDLen]byte
	isMade bool
}

// Bytes returns the id; empty when there is none.
func (id *RequestID) Bytes() []byte {
	if id.isMade {
		return id.made[:]
	}
	return id.client
}

// requestIDs makes request ids: 16 hex digits drawn at random once per
// process, then a counter in 16 hex digits. Ids are unique within a
// process and, with overwhelming probability, across processes; unlike
// nginx's they are not unpredictable, which a correlation id need not be.
// Making one allocates nothing and costs one atomic add. The zero value
// is ready to use.
type requestIDs struct {
	once   sync.Once
	prefix [16]byte
	n      atomic.Uint64
}

func (g *requestIDs) next(dst *[requestIDLen]byte) {
	g.once.Do(func() {
		var r [8]byte
		rand.Read(r[:]) // never fails (crypto/rand, Go 1.24+)
		hex.Encode(g.prefix[:], r[:])
	})
	copy(dst[:16], g.prefix[:])
	n := g.n.Add(1)
	for i := requestIDLen - 1; i >= 16; i-- {
		dst[i] = hexDigits[n&0xf]
		n >>= 4
	}
}

const hexDigits = "0123456789abcdef"

// setRequestID gives the request its id: the client's X-Request-Id when
// it is a sane token, or a new one, which goes to the backend in place
// of the client's.
func (f *flow) setRequestID(ex wire.Exchange) {
	if id := ex.Header("X-Request-Id"); saneRequestID(id) {
		f.rec.RequestID.client = id
		return
	}
	f.p.ids.next(&f.rec.RequestID.made)
	f.rec.RequestID.isMade = true
	id := ex.Alloc(requestIDLen)
	copy(id, f.rec.RequestID.made[:])
	ex.Request().Header.Set(requestIDName, id)
}

// requestIDName is the field a request's id goes in.
var requestIDName = []byte("X-Request-Id")

// saneRequestID reports whether id can be passed on and logged as it
// is: 1 to 200 visible ASCII characters.
func saneRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > maxClientRequestID {
		return false
	}
	for _, c := range id {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// SetClient makes id the client's p (for tests and engines' recorders).
func (id *RequestID) SetClient(p []byte) { *id = RequestID{client: p} }

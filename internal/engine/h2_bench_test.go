package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// HTTP/2 requests through the event loops, for benchmarks and allocation
// counts: an h2c client that sends one request at a time on one
// connection, as a pre-encoded HEADERS frame (its fields indexed in the
// server's HPACK table, as on a connection in use), and reads the answer's
// frames without decoding them. It allocates nothing per request, so
// what a count sees is the proxy's (and, in process, its backend's).

// h2BenchClient is that client.
type h2BenchClient struct {
	nc    net.Conn
	br    *bufio.Reader
	frame []byte // the request's HEADERS frame; its stream id is patched
	id    uint32
	hdr   [9]byte
	ack   []byte
}

// dialH2Bench connects to an h2c listener at addr and makes its request
// for path ready (a browser-like GET), the server's HPACK table warmed.
func dialH2Bench(t testing.TB, addr, path string) *h2BenchClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &h2BenchClient{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), id: 1}
	c.ack = appendBenchFrame(nil, http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
	var pre bytes.Buffer
	pre.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&pre, nil)
	// Windows as large as they go: the answers' bodies never wait for
	// credit.
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	if _, err := nc.Write(pre.Bytes()); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	encode := func() []byte {
		block.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: "bench.example"}, {Name: ":path", Value: path},
			{Name: "user-agent", Value: "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0"},
			{Name: "accept", Value: "application/json"}, {Name: "accept-encoding", Value: "gzip, deflate, br"},
			{Name: "accept-language", Value: "en-US,en;q=0.5"},
		} {
			enc.WriteField(f)
		}
		return appendBenchFrame(nil, http2.FrameHeaders, http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders, 0, block.Bytes())
	}
	c.frame = encode()
	if err := c.roundTrip(); err != nil { // the fields go into the table
		t.Fatal(err)
	}
	c.frame = encode() // every field indexed now
	return c
}

// appendBenchFrame appends a frame.
func appendBenchFrame(b []byte, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(typ), byte(flags))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, payload...)
}

// roundTrip sends a request on the next stream and reads frames until
// its answer ends.
func (c *h2BenchClient) roundTrip() error {
	id := c.id
	c.id += 2
	binary.BigEndian.PutUint32(c.frame[5:], id)
	c.nc.SetDeadline(time.Now().Add(testTimeout))
	if _, err := c.nc.Write(c.frame); err != nil {
		return err
	}
	for {
		if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
			return err
		}
		n := int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
		typ, flags := http2.FrameType(c.hdr[3]), http2.Flags(c.hdr[4])
		sid := binary.BigEndian.Uint32(c.hdr[5:]) & (1<<31 - 1)
		if _, err := c.br.Discard(n); err != nil {
			return err
		}
		switch typ {
		case http2.FrameSettings:
			if flags&http2.FlagSettingsAck == 0 {
				if _, err := c.nc.Write(c.ack); err != nil {
					return err
				}
			}
		case http2.FrameHeaders, http2.FrameData:
			if sid == id && flags&http2.FlagDataEndStream != 0 {
				return nil
			}
		case http2.FrameRSTStream, http2.FrameGoAway:
			return fmt.Errorf("stream %d: got a %v frame, want the answer", id, typ)
		}
	}
}

// h2BenchTarget is where an h2c client's requests go.
type h2BenchTarget uint8

const (
	h2BenchRespond  h2BenchTarget = iota // a route's fixed answer
	h2BenchProxyH1                       // proxied to an HTTP/1.1 backend
	h2BenchProxyH2C                      // proxied to an h2c backend
)

// newH2Bench starts a loop engine proxy with an h2c listener (the real
// pipeline, without a recorder or guard) and, for the proxied targets, a
// backend (another engine, answering from a fixed route, over HTTP/1.1 or
// h2c), and returns a client whose requests go to target.
func newH2Bench(t testing.TB, target h2BenchTarget) *h2BenchClient {
	fixed := map[string]proxy.Fixed{"/bench": {Status: 200, Header: *benchHeader, Body: benchBody}}
	long := Options{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, WriteTimeout: time.Minute}
	cfg := loopConfig{bare: true, opts: long}
	cfg.opts.H2C = true
	path := "/bench"
	switch target {
	case h2BenchRespond:
		cfg.fixed = fixed
	default:
		bopts := long
		to := defaultTransport
		if target == h2BenchProxyH2C {
			bopts.H2C = true
			to.Protocol = wire.ProtoH2C
		}
		backend := startLoopProxy(t, netpoll.KindEpoll, loopConfig{bare: true, fixed: fixed, opts: bopts})
		cfg.backends, cfg.to = []string{backend.addr}, to
	}
	p := startLoopProxy(t, netpoll.KindEpoll, cfg)
	return dialH2Bench(t, p.addr, path)
}

// benchH2 runs round trips to target. Beside the time per round trip
// (mostly loopback latency, and noisy on a shared machine) it reports the
// process's CPU time per request, client, proxy and backend together
// (cpu-ns/op): what a change in the request's cost shows in.
func benchH2(b *testing.B, target h2BenchTarget) {
	c := newH2Bench(b, target)
	b.ReportAllocs()
	before := processCPU()
	n := 0
	for b.Loop() {
		if err := c.roundTrip(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(processCPU()-before)/float64(n), "cpu-ns/op")
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoopH2Respond measures an h2c request answered by a route's
// fixed answer, through the event loops (client and proxy on this
// machine: compare runs with benchstat).
func BenchmarkLoopH2Respond(b *testing.B) { benchH2(b, h2BenchRespond) }

// BenchmarkLoopH2Proxy measures an h2c request proxied to an HTTP/1.1
// backend in keep-alive (bench's "h2 proxy" case).
func BenchmarkLoopH2Proxy(b *testing.B) { benchH2(b, h2BenchProxyH1) }

// BenchmarkLoopH2ProxyH2C measures an h2c request proxied to an h2c
// backend (the path of bench's grpc case).
func BenchmarkLoopH2ProxyH2C(b *testing.B) { benchH2(b, h2BenchProxyH2C) }

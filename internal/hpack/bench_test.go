package hpack

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// A stream is the heads of one direction of a connection, in order,
// with the values that change from message to message changing (path,
// content-length, date, etag, grpc-timeout, client address, request
// id): what a decoder sees in steady state, indexed fields and literals
// mixed.
type stream struct {
	name  string
	heads [][]tf
}

// makeStream returns n heads: base, with its changing values changed
// for head i.
func makeStream(name string, base []tf, n int) stream {
	s := stream{name: name}
	for i := range n {
		h := make([]tf, len(base))
		copy(h, base)
		for j := range h {
			switch h[j].name {
			case ":path":
				if h[j].value != "/helloworld.Greeter/SayHello" {
					h[j].value = "/articles/" + strconv.Itoa(i%97) + "?page=" + strconv.Itoa(i%7)
				}
			case "content-length":
				h[j].value = strconv.Itoa(1000 + i%13*77)
			case "date":
				h[j].value = fmt.Sprintf("Mon, 21 Oct 2013 20:%02d:%02d GMT", i/60%60, i%60)
			case "etag":
				h[j].value = fmt.Sprintf(`"5f3c-%08x"`, i%31)
			case "x-request-id":
				h[j].value = fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)
			case "x-forwarded-for":
				h[j].value = fmt.Sprintf("203.0.113.%d", i%50)
			case "grpc-timeout":
				h[j].value = strconv.Itoa(9990+i%10) + "m"
			}
		}
		s.heads = append(s.heads, h)
	}
	return s
}

// streams are the benchmarks' and allocation tests' connections.
func streams() []stream {
	return []stream{
		makeStream("browser-request", browserRequest, 1100),
		makeStream("curl-request", curlRequest, 1100),
		makeStream("grpc-request", grpcRequest, 1100),
		makeStream("proxied-request", proxiedRequest, 1100),
		makeStream("fixed-response", fixedResponse, 1100),
		makeStream("page-response", pageResponse, 1100),
	}
}

// warmup is how many heads of a stream set up the dynamic table and
// the buffers before anything is measured.
const warmup = 100

// xnetBlocks encodes a stream's heads with x/net's encoder (what Go's
// HTTP/2 clients and servers send).
func xnetBlocks(s stream) [][]byte {
	var buf bytes.Buffer
	e := hpack.NewEncoder(&buf)
	var blocks [][]byte
	for _, h := range s.heads {
		buf.Reset()
		for _, f := range h {
			e.WriteField(hpack.HeaderField{Name: f.name, Value: f.value, Sensitive: f.sensitive})
		}
		blocks = append(blocks, bytes.Clone(buf.Bytes()))
	}
	return blocks
}

// ourBlocks encodes a stream's heads with our encoder.
func ourBlocks(s stream) [][]byte {
	e := NewEncoder()
	var blocks [][]byte
	for _, h := range s.heads {
		var b []byte
		for _, f := range h {
			b = e.Encode(b, []byte(f.name), []byte(f.value), f.sensitive)
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// sink gathers a block's fields as a connection would (internal/h2
// keeps them in a slice it reuses): its method value is the emit
// function.
type sink struct{ fields []Field }

func (s *sink) field(f Field) { s.fields = append(s.fields, f) }

// byteHeads are a stream's heads as byte slices, for the encoder.
func byteHeads(s stream) [][][2][]byte {
	var out [][][2][]byte
	for _, h := range s.heads {
		var bh [][2][]byte
		for _, f := range h {
			bh = append(bh, [2][]byte{[]byte(f.name), []byte(f.value)})
		}
		out = append(out, bh)
	}
	return out
}

// TestDecodeAllocs: in steady state, decoding a connection's heads
// (from x/net's encoder or ours; requests and responses) allocates
// nothing, with the fields gathered as a connection gathers them.
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, s := range streams() {
		for _, enc := range []struct {
			name   string
			blocks func(stream) [][]byte
		}{{"x/net", xnetBlocks}, {"ours", ourBlocks}} {
			t.Run(s.name+"/"+enc.name, func(t *testing.T) {
				blocks := enc.blocks(s)
				d := NewDecoder(DecoderConfig{MaxHeaderListSize: 64 << 10, MaxStringLength: 256 << 10})
				var out sink
				i := 0
				decodeNext := func() {
					out.fields = out.fields[:0]
					if err := d.Decode(blocks[i], out.field); err != nil {
						t.Fatal(err)
					}
					i++
				}
				for range warmup {
					decodeNext()
				}
				if n := testing.AllocsPerRun(len(blocks)-warmup-1, decodeNext); n != 0 {
					t.Errorf("got %v allocations a block, want 0", n)
				}
				if got, want := len(out.fields), len(s.heads[i-1]); got != want {
					t.Errorf("last block: %d fields, want %d", got, want)
				}
			})
		}
	}
}

// TestEncodeAllocs: in steady state, encoding a connection's heads into
// a buffer it reuses allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, s := range streams() {
		t.Run(s.name, func(t *testing.T) {
			heads := byteHeads(s)
			e := NewEncoder()
			buf := make([]byte, 0, 4096)
			i := 0
			encodeNext := func() {
				buf = buf[:0]
				for j, f := range heads[i] {
					buf = e.Encode(buf, f[0], f[1], s.heads[i][j].sensitive)
				}
				i++
			}
			for range warmup {
				encodeNext()
			}
			if n := testing.AllocsPerRun(len(heads)-warmup-1, encodeNext); n != 0 {
				t.Errorf("got %v allocations a block, want 0", n)
			}
		})
	}
}

// TestEncodeStringsAllocs: names and values that are strings (constants
// or short variables, as internal/h2 has today) cost no allocation when
// converted at the call: Encode keeps neither, so the compiler puts the
// bytes on the stack.
func TestEncodeStringsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := NewEncoder()
	buf := make([]byte, 0, 256)
	codes := []string{"200", "404", "503"}
	i := 0
	n := testing.AllocsPerRun(100, func() {
		status, ctype := codes[i%len(codes)], "text/plain; charset=utf-8"
		buf = e.Encode(buf[:0], []byte(":status"), []byte(status), false)
		buf = e.Encode(buf, []byte("content-type"), []byte(ctype), false)
		i++
	})
	if n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// BenchmarkDecode decodes a connection's blocks (from x/net's encoder)
// in order, with our decoder and x/net's; an op is one head. The first
// heads set the table up, unmeasured, each time the stream starts again.
func BenchmarkDecode(b *testing.B) {
	for _, s := range streams() {
		blocks := xnetBlocks(s)
		b.Run(s.name+"/impl=ours", func(b *testing.B) {
			b.ReportAllocs()
			var d *Decoder
			var out sink
			for i := 0; b.Loop(); i++ {
				k := i % (len(blocks) - warmup)
				if k == 0 {
					b.StopTimer()
					d = NewDecoder(DecoderConfig{MaxHeaderListSize: 64 << 10, MaxStringLength: 256 << 10})
					for _, blk := range blocks[:warmup] {
						out.fields = out.fields[:0]
						d.Decode(blk, out.field)
					}
					b.StartTimer()
				}
				out.fields = out.fields[:0]
				if err := d.Decode(blocks[warmup+k], out.field); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.name+"/impl=xnet", func(b *testing.B) {
			b.ReportAllocs()
			var d *hpack.Decoder
			var fields []hpack.HeaderField
			emit := func(f hpack.HeaderField) { fields = append(fields, f) }
			for i := 0; b.Loop(); i++ {
				k := i % (len(blocks) - warmup)
				if k == 0 {
					b.StopTimer()
					d = hpack.NewDecoder(DefaultTableSize, emit)
					d.SetMaxStringLength(256 << 10)
					for _, blk := range blocks[:warmup] {
						fields = fields[:0]
						d.Write(blk)
						d.Close()
					}
					b.StartTimer()
				}
				fields = fields[:0]
				if _, err := d.Write(blocks[warmup+k]); err != nil {
					b.Fatal(err)
				}
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode encodes a connection's heads in order into a reused
// buffer, with our encoder ([]byte fields) and x/net's (string
// fields); an op is one head.
func BenchmarkEncode(b *testing.B) {
	for _, s := range streams() {
		b.Run(s.name+"/impl=ours", func(b *testing.B) {
			b.ReportAllocs()
			heads := byteHeads(s)
			e := NewEncoder()
			buf := make([]byte, 0, 4096)
			for i := 0; b.Loop(); i++ {
				k := i % len(heads)
				buf = buf[:0]
				for j, f := range heads[k] {
					buf = e.Encode(buf, f[0], f[1], s.heads[k][j].sensitive)
				}
			}
		})
		b.Run(s.name+"/impl=xnet", func(b *testing.B) {
			b.ReportAllocs()
			var heads [][]hpack.HeaderField
			for _, h := range s.heads {
				var hf []hpack.HeaderField
				for _, f := range h {
					hf = append(hf, hpack.HeaderField{Name: f.name, Value: f.value, Sensitive: f.sensitive})
				}
				heads = append(heads, hf)
			}
			var buf bytes.Buffer
			buf.Grow(4096)
			e := hpack.NewEncoder(&buf)
			for i := 0; b.Loop(); i++ {
				buf.Reset()
				for _, f := range heads[i%len(heads)] {
					e.WriteField(f)
				}
			}
		})
	}
}

// TestEncodedSize: on each stream, in steady state, our encoder's
// blocks take no more bytes than x/net's (its indexing policy costs
// nothing in compression where it differs: request ids).
func TestEncodedSize(t *testing.T) {
	for _, s := range streams() {
		ours, xnet := 0, 0
		for _, b := range ourBlocks(s)[warmup:] {
			ours += len(b)
		}
		for _, b := range xnetBlocks(s)[warmup:] {
			xnet += len(b)
		}
		if ours > xnet {
			t.Errorf("%s: %d bytes, x/net's encoder %d", s.name, ours, xnet)
		}
		t.Logf("%s: %d bytes a head, x/net's encoder %d", s.name, ours/(len(s.heads)-warmup), xnet/(len(s.heads)-warmup))
	}
}

package h2

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// SETTINGS_HEADER_TABLE_SIZE both ways (RFC 7541 §4.2, RFC 9113
// §6.5.2): ours binds the peer's encoder once it has acknowledged it,
// the peer's binds our encoder at once.

// TestServerHeaderTableSizeAcknowledged: with a HeaderTableSize below
// the default, the peer encodes against the default table until it has
// acknowledged our SETTINGS (a block that indexes an entry larger than
// our size is taken), and its first block after the acknowledgement must
// begin with a table size update: one that does is taken, one that does
// not is a COMPRESSION_ERROR.
func TestServerHeaderTableSizeAcknowledged(t *testing.T) {
	big := strings.Repeat("v", 200) // an entry larger than our table
	tests := []struct {
		name string
		// update: the peer's encoder signals our size after the ACK.
		update bool
		want   http2.ErrCode // after the ACK; 0: taken
	}{
		{name: "size update after the ack", update: true},
		{name: "no size update after the ack", want: http2.ErrCodeCompression},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			p := newRawPeer(t)
			p.c = NewServerConn(countingOutput{p}, r, Config{HeaderTableSize: 100})
			p.wr.WriteString(http2.ClientPreface)
			p.fr.WriteSettings()
			// Before our SETTINGS are acknowledged: the default table,
			// the big field indexed by the first request, used by the
			// second.
			p.headers(1, true, get("/a", "x-big", big)...)
			p.headers(3, true, get("/b", "x-big", big)...)
			if err := p.feed(); err != nil {
				t.Fatalf("before the ACK: got %v, want the requests taken", err)
			}
			r.wantEvents(t, "request 1 GET /a end=true", "request 3 GET /b end=true")
			p.fr.WriteSettingsAck()
			if tt.update {
				p.enc.SetMaxDynamicTableSizeLimit(100)
			}
			p.headers(5, true, get("/c", "x-small", "1")...)
			p.feed()
			if tt.want != 0 {
				p.wantConnError(tt.want)
				return
			}
			if err := p.c.Err(); err != nil {
				t.Fatalf("got %v, want the request taken", err)
			}
			r.wantEvents(t, "request 5 GET /c end=true")
		})
	}
}

// TestServerHeaderTableSizeAboveDefault: a HeaderTableSize above the
// default lets the peer grow its table to it once it has acknowledged
// our SETTINGS, not before.
func TestServerHeaderTableSizeAboveDefault(t *testing.T) {
	for _, acked := range []bool{true, false} {
		t.Run(map[bool]string{true: "acknowledged", false: "not acknowledged"}[acked], func(t *testing.T) {
			r := newRecorder()
			p := newRawPeer(t)
			p.c = NewServerConn(countingOutput{p}, r, Config{HeaderTableSize: 8192})
			p.wr.WriteString(http2.ClientPreface)
			p.fr.WriteSettings()
			if acked {
				p.fr.WriteSettingsAck()
			}
			p.feed()
			p.enc.SetMaxDynamicTableSizeLimit(8192)
			p.enc.SetMaxDynamicTableSize(8192)
			p.headers(1, true, get("/")...)
			p.feed()
			switch err := p.c.Err(); {
			case acked && err != nil:
				t.Fatalf("got %v, want the request taken", err)
			case !acked:
				p.wantConnError(http2.ErrCodeCompression)
			}
		})
	}
}

// TestServerPeerHeaderTableSize: the peer's SETTINGS_HEADER_TABLE_SIZE
// bounds our encoder: at 0, our next block begins with a size update to
// 0 and nothing is indexed, so that a field sent twice is sent as a
// literal twice.
func TestServerPeerHeaderTableSize(t *testing.T) {
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, fieldList("x-answer", "a value worth indexing"), true)
	}
	p := newRawPeer(t)
	p.c = NewServerConn(countingOutput{p}, r, Config{})
	p.wr.WriteString(http2.ClientPreface)
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	p.fr.WriteSettingsAck()
	p.feed()
	p.out.Reset()
	var blocks [][]byte
	for id := uint32(1); id <= 3; id += 2 {
		p.headers(id, true, get("/")...)
		p.feed()
		out := p.out.Bytes()
		h := parseFrameHeader(out)
		if h.typ != http2.FrameHeaders {
			t.Fatalf("stream %d: got a %v frame, want HEADERS", id, h.typ)
		}
		blocks = append(blocks, bytes.Clone(out[frameHeaderLen:frameHeaderLen+h.length]))
		p.out.Reset()
	}
	if len(blocks[0]) == 0 || blocks[0][0] != 0x20 {
		t.Fatalf("got a first block beginning %x, want a size update to 0 (20)", blocks[0][:min(len(blocks[0]), 1)])
	}
	if !bytes.Equal(blocks[0][1:], blocks[1]) {
		t.Errorf("got blocks %x and %x, want the second the first without its size update (nothing indexed)", blocks[0], blocks[1])
	}
	d := hpack.NewDecoder(0, nil)
	for i, b := range blocks {
		fs, err := d.DecodeFull(b)
		if err != nil || len(fs) != 2 || fs[1].Value != "a value worth indexing" {
			t.Errorf("block %d: got %v (%v), want :status and x-answer", i, fs, err)
		}
	}
}

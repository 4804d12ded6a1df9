//go:build linux

package engine

import (
	"bytes"
	"testing"

	"github.com/helios-lb/helios/internal/netpoll"
	"golang.org/x/sys/unix"
)

// TestWriteVec checks the buffered writer's one-call path for its
// buffered bytes and a large piece (Write), and for the framing behind
// the piece too (WriteThen): nothing stays buffered, and the bytes
// arrive whole and in order when the socket takes everything at once,
// and when it takes part (a small send buffer), with the rest kept
// pending and written when there is room.
func TestWriteVec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sndbuf int // 0: the system's default
		piece  int
		then   string // WriteThen's framing; "" for Write
	}{
		{"fits", 0, 20 << 10, ""},
		{"partial", 4096, 512 << 10, ""},
		{"fits then", 0, 20 << 10, "\r\n0\r\n\r\n"},
		{"partial then", 4096, 512 << 10, "\r\n0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			if tc.sndbuf > 0 {
				if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, tc.sndbuf); err != nil {
					t.Fatal(err)
				}
			}
			p, err := netpoll.New(netpoll.Native())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown()
			fw := &fdWriter{fd: fds[0], p: p, file: -1}
			var w writer
			w.reset(fw, make([]byte, writeBufSize))

			head := []byte("4000\r\n")
			piece := bytes.Repeat([]byte("0123456789abcdef"), tc.piece/16)
			w.WriteString(string(head))
			if tc.then != "" {
				w.WriteThen(piece, tc.then)
				if w.err != nil {
					t.Fatalf("WriteThen: %v", w.err)
				}
			} else if n, err := w.Write(piece); n != len(piece) || err != nil {
				t.Fatalf("Write: %d, %v; want %d, nil", n, err, len(piece))
			}
			if w.buffered() != 0 {
				t.Errorf("buffered after a large piece: %d bytes, want them sent with it", w.buffered())
			}
			if tc.sndbuf > 0 && len(fw.pending) == 0 {
				t.Errorf("a %d-byte send buffer took %d bytes at once: the partial case did not happen", tc.sndbuf, tc.piece)
			}

			want := append(append(append([]byte{}, head...), piece...), tc.then...)
			readPairInOrder(t, fw, fds[1], want)
			if fw.sent != int64(len(want)) {
				t.Errorf("sent: %d, want %d", fw.sent, len(want))
			}
		})
	}
}

// readPairInOrder reads want's length from fd, the other end of fw's
// socket pair, writing what fw holds pending as room appears, and fails
// the test unless the bytes are want.
func readPairInOrder(t *testing.T, fw *fdWriter, fd int, want []byte) {
	t.Helper()
	var got []byte
	buf := make([]byte, 64<<10)
	for tries := 0; len(got) < len(want) && tries < 100000; tries++ {
		if len(fw.pending) > 0 {
			if _, err := fw.flushPending(); err != nil {
				t.Fatal(err)
			}
		}
		n, err := unix.Read(fd, buf)
		if n > 0 {
			got = append(got, buf[:n]...)
		} else if err != nil && err != unix.EAGAIN {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d in order (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
}

// firstDiff returns the index of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// TestGatherOneWrite: what is written between gather and endGather (a
// tls.Conn's records of one large plaintext) leaves in one system call
// (a SOCK_SEQPACKET pair keeps each write a message of its own); with a
// small send buffer the rest stays pending and goes out in order; with
// bytes already pending, what is gathered stays behind them.
func TestGatherOneWrite(t *testing.T) {
	records := [][]byte{bytes.Repeat([]byte("a"), 16<<10), bytes.Repeat([]byte("b"), 16<<10), []byte("tail")}
	var want []byte
	for _, r := range records {
		want = append(want, r...)
	}
	pair := func(t *testing.T, typ, sndbuf int) (*fdWriter, int) {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		if sndbuf > 0 {
			if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf); err != nil {
				t.Fatal(err)
			}
		}
		p, err := netpoll.New(netpoll.Native())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Shutdown() })
		return &fdWriter{fd: fds[0], p: p, file: -1}, fds[1]
	}
	gather := func(t *testing.T, fw *fdWriter, buf *[]byte) {
		fw.gather(buf)
		for _, r := range records {
			if n, err := fw.Write(r); n != len(r) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if err := fw.endGather(); err != nil {
			t.Fatal(err)
		}
		if len(*buf) != 0 || fw.gathering != nil {
			t.Errorf("after endGather: %d bytes left in the buffer, gathering %v; want none", len(*buf), fw.gathering != nil)
		}
	}

	t.Run("one message", func(t *testing.T) {
		fw, peer := pair(t, unix.SOCK_SEQPACKET, 0)
		var buf []byte
		gather(t, fw, &buf)
		got := make([]byte, 128<<10)
		n, err := unix.Read(peer, got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:n], want) {
			t.Fatalf("first message: %d bytes, want all %d of the records in one", n, len(want))
		}
		if n, _ := unix.Read(peer, got); n > 0 {
			t.Errorf("a second message of %d bytes, want none", n)
		}
	})
	t.Run("partial", func(t *testing.T) {
		fw, peer := pair(t, unix.SOCK_STREAM, 4096)
		var buf []byte
		gather(t, fw, &buf)
		if len(fw.pending) == 0 {
			t.Fatal("a 4 KiB send buffer took everything: the partial case did not happen")
		}
		readPairInOrder(t, fw, peer, want)
	})
	t.Run("behind pending", func(t *testing.T) {
		fw, peer := pair(t, unix.SOCK_STREAM, 0)
		fw.keep([]byte("first"))
		var buf []byte
		gather(t, fw, &buf)
		readPairInOrder(t, fw, peer, append([]byte("first"), want...))
	})
}

package listener

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mustListen(t *testing.T, cfg Config) *Pool {
	t.Helper()
	p, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// acceptOn waits up to two seconds for a connection on one of fds (the
// engine's accept, done by hand) and closes it; it reports which fd
// took it, or -1.
func acceptOn(t *testing.T, fds []int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, fd := range fds {
			nfd, _, err := syscall.Accept(fd)
			if err == nil {
				syscall.Close(nfd)
				return fd
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}

// TestCheckFree guards issue 12: a second helios serve on the same
// address bound next to the first (SO_REUSEPORT) and took half its
// connections.
func TestCheckFree(t *testing.T) {
	pool := mustListen(t, Config{Name: "web", Address: "127.0.0.1:0", Sockets: 2})
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()

	tests := []struct {
		name    string
		address string
		wantErr string
	}{
		{"free port", freeAddr, ""},
		{"port 0", "127.0.0.1:0", ""},
		{"held by a reuseport pool", pool.Addr().String(), "listener web: " + pool.Addr().String() + " is already in use by another process"},
		{"held by a plain listener", plain.Addr().String(), "listener web: " + plain.Addr().String() + " is already in use by another process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFree(Config{Name: "web", Address: tt.address})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || !strings.HasPrefix(got, tt.wantErr) {
				t.Errorf("got %q, want %q", got, tt.wantErr)
			}
		})
	}
}

// TestAdoptServesHandedOverSockets: the sockets of one pool, handed over
// as files, keep taking connections in a new pool after the first is
// closed; and one socket is served as many times as the config asks.
func TestAdoptServesHandedOverSockets(t *testing.T) {
	old := mustListen(t, Config{Name: "web", Address: "127.0.0.1:0", Sockets: 1})
	addr := old.Addr().String()
	files, err := old.Files()
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := Adopt(Config{Name: "web", Address: addr, Sockets: 3}, files)
	if err != nil {
		t.Fatal(err)
	}
	defer adopted.Close()
	if got := adopted.Sockets(); got != 3 {
		t.Errorf("sockets: got %v, want %v", got, 3)
	}
	if got := adopted.Addr().String(); got != addr {
		t.Errorf("address: got %v, want %v", got, addr)
	}
	// Connections queued before the old pool closes stay queued on the
	// one socket both pools share; after, the new pool's descriptors
	// take every one.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	old.Close()
	fds, err := adopted.FDs()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if i > 0 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			c.Close()
		}
		if acceptOn(t, fds) < 0 {
			t.Fatalf("connection %d: not accepted on the adopted sockets", i)
		}
	}
}

func TestAdoptRefusesWhatIsNotATCPListener(t *testing.T) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	f, err := udp.(*net.UDPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Adopt(Config{Name: "web", Sockets: 1}, nil)
	if err == nil || err.Error() != "listener web: no sockets to adopt" {
		t.Errorf("no files: got %v, want an error saying there are none", err)
	}
	_, err = Adopt(Config{Name: "web", Sockets: 1}, []*os.File{f})
	if err == nil || !strings.HasPrefix(err.Error(), "listener web: adopting socket") {
		t.Errorf("a UDP socket: got %v, want an adoption error", err)
	}
}

// TestEphemeralHint: a port taken in the ephemeral range gets the hint
// that a connection may hold it; one outside, or no range, gets none.
func TestEphemeralHint(t *testing.T) {
	if h := ephemeralHint(41990, 32768, 60999); !strings.Contains(h, "ephemeral range (32768-60999)") || !strings.Contains(h, "choose a port below 32768") {
		t.Errorf("port 41990 in 32768-60999: got %q, want the hint with the range", h)
	}
	for _, tt := range []struct{ port, lo, hi int }{{8080, 32768, 60999}, {61000, 32768, 60999}, {41990, 0, 0}} {
		if h := ephemeralHint(tt.port, tt.lo, tt.hi); h != "" {
			t.Errorf("port %d, range %d-%d: got %q, want no hint", tt.port, tt.lo, tt.hi, h)
		}
	}
}

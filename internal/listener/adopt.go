package listener

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Adopt returns a pool serving sockets that are already bound and
// listening: handed over by the process this one upgraded from, or
// passed by systemd (socket activation). It takes ownership of files.
//
// When fewer sockets come than cfg.Sockets (systemd passes one per
// address), the pool serves each of them several times over, so that
// every accept loop or event loop still has one: they share the one
// accept queue, as nginx's workers do without reuseport. The backlog is
// the one the sockets were created with.
func Adopt(cfg Config, files []*os.File) (*Pool, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("listener %s: no sockets to adopt", cfg.Name)
	}
	defer func() {
		for _, f := range files {
			f.Close() // FileListener dups the descriptor
		}
	}()
	n := max(cfg.Sockets, len(files))
	p := &Pool{name: cfg.Name}
	p.SetMaxConnections(cfg.MaxConnections)
	for i := 0; i < n; i++ {
		ln, err := net.FileListener(files[i%len(files)])
		if err == nil {
			if _, ok := ln.(*net.TCPListener); !ok {
				ln.Close()
				err = errors.New("not a TCP socket")
			}
		}
		if err != nil {
			p.closeSockets()
			return nil, fmt.Errorf("listener %s: adopting socket %s: %w", cfg.Name, files[i%len(files)].Name(), err)
		}
		if i == 0 {
			p.addr = ln.Addr()
		}
		p.lns = append(p.lns, ln)
	}
	return p, nil
}

// Files returns a duplicate of each of the pool's sockets, for handing
// them to another process (a binary upgrade). The caller closes them;
// the pool keeps its own.
func (p *Pool) Files() ([]*os.File, error) {
	fds, err := p.FDs()
	if err != nil {
		return nil, err
	}
	out := make([]*os.File, 0, len(fds))
	for _, fd := range fds {
		d, err := dupCloexec(fd)
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, fmt.Errorf("listener %s: duplicating socket: %w", p.name, err)
		}
		out = append(out, os.NewFile(uintptr(d), "tcp:"+p.addr.String()))
	}
	return out, nil
}

// dupCloexec duplicates fd with close-on-exec set: an exec only passes
// what it is told to.
func dupCloexec(fd int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	d, err := syscall.Dup(fd)
	if err != nil {
		return 0, os.NewSyscallError("dup", err)
	}
	syscall.CloseOnExec(d)
	return d, nil
}

// CheckFree returns an error when another socket is already bound to
// cfg.Address. The pool's own sockets set SO_REUSEPORT, and the kernel
// lets a second process of the same user bind next to them and then
// splits new connections between the two — silently, as nginx does.
// Helios refuses instead, as Caddy and Traefik do; a binary upgrade
// hands the sockets over (Adopt) rather than binding again. A probe
// socket without SO_REUSEPORT is bound (not listened on) and closed:
// the bind fails exactly when some socket holds the address. Port 0
// cannot collide and is not probed.
func CheckFree(cfg Config) error {
	ta, err := net.ResolveTCPAddr("tcp", cfg.Address)
	if err != nil {
		return fmt.Errorf("listener %s: resolving %s: %w", cfg.Name, cfg.Address, err)
	}
	if ta.Port == 0 {
		return nil
	}
	err = probeBind(ta)
	if errors.Is(err, syscall.EADDRINUSE) {
		lo, hi := ephemeralRange()
		return fmt.Errorf("listener %s: %s is already in use by another process; Helios does not share a listening address "+
			"(two processes would split its connections): stop the other process, or hand its sockets over with SIGUSR2 (helios upgrade)%s",
			cfg.Name, cfg.Address, ephemeralHint(ta.Port, lo, hi))
	}
	if err != nil {
		return fmt.Errorf("listener %s: checking %s: %w", cfg.Name, cfg.Address, err)
	}
	return nil
}

// ephemeralHint says, for a port in the system's ephemeral range lo..hi,
// that outgoing connections take ports there too: one that held it (or
// still does, in TIME_WAIT) makes the address look taken with no
// process listening. Empty for a port outside the range, or no range.
func ephemeralHint(port, lo, hi int) string {
	if lo <= 0 || port < lo || port > hi {
		return ""
	}
	return fmt.Sprintf(". The port is in this system's ephemeral range (%d-%d), where outgoing connections take ports too: "+
		"if no process listens on it, a connection holds it; choose a port below %d", lo, hi, lo)
}

// ephemeralRange is the system's range of ports for outgoing connections
// (Linux: /proc/sys/net/ipv4/ip_local_port_range); 0, 0 when unknown.
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 || hi < lo {
		return 0, 0
	}
	return lo, hi
}

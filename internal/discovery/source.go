package discovery

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/helios-lb/helios/internal/config"
)

// Target is one backend a source found.
type Target struct {
	// Addr is host:port.
	Addr string
	// Weight is the backend's weight, 1-1000.
	Weight int
}

// Answer is what one lookup of a source found.
type Answer struct {
	// Targets are the backends, sorted by address, each address once.
	Targets []Target
	// TTL is the smallest TTL of the records behind Targets; 0 when the
	// source has none (a file).
	TTL time.Duration
}

// Source is somewhere backends are found.
type Source interface {
	// Fetch looks the backends up. An answer with no targets comes with
	// an error wrapping ErrNoRecords. errUnchanged means there is nothing
	// new since the last Fetch (a file that did not change).
	Fetch(ctx context.Context) (Answer, error)
	// String names the source in logs, metrics and the admin API.
	String() string
}

// errUnchanged is a Fetch's way of saying that nothing changed since it
// last answered, so there is nothing to apply, log or count again.
var errUnchanged = errors.New("unchanged")

// maxWeight is the largest backend weight (config's 1-1000).
const maxWeight = 1000

// DNS is a host name whose A and AAAA records are backends at one port.
type DNS struct {
	Resolver *Resolver
	Name     string
	Port     int
	// Weight is every address's weight, 1-1000.
	Weight int
}

// String returns "dns NAME:PORT".
func (d *DNS) String() string { return "dns " + d.Name + ":" + strconv.Itoa(d.Port) }

// Fetch looks the name's addresses up.
func (d *DNS) Fetch(ctx context.Context) (Answer, error) {
	addrs, ttl, err := d.Resolver.LookupAddrs(ctx, d.Name)
	if err != nil {
		return Answer{}, err
	}
	ts := make([]Target, 0, len(addrs))
	for _, a := range addrs {
		ts = append(ts, Target{Addr: hostPort(a, d.Port), Weight: d.Weight})
	}
	return Answer{Targets: tidy(ts), TTL: ttl}, nil
}

// SRV is a service name whose SRV records are backends, each target's
// addresses at the record's port with the record's weight. Only the
// records of the lowest priority count (RFC 2782: the others are
// fallbacks, and a proxy that spread load over them would send traffic
// where the service owner said not to). Weights are scaled into 1-1000
// when one is larger, and a weight of 0 counts as 1.
type SRV struct {
	Resolver *Resolver
	Name     string
}

// String returns "srv NAME".
func (s *SRV) String() string { return "srv " + s.Name }

// Fetch looks the records up, and the addresses of targets the answer
// carried none for.
func (s *SRV) Fetch(ctx context.Context) (Answer, error) {
	recs, ttl, err := s.Resolver.LookupSRV(ctx, s.Name)
	if err != nil {
		return Answer{}, err
	}
	best := recs[0].Priority
	maxW := uint16(0)
	for _, r := range recs {
		best = min(best, r.Priority)
	}
	recs = slices.DeleteFunc(recs, func(r SRVRecord) bool { return r.Priority != best })
	for _, r := range recs {
		maxW = max(maxW, r.Weight)
	}
	var ts []Target
	for _, r := range recs {
		addrs := r.Addrs
		if addrs == nil {
			var attl time.Duration
			addrs, attl, err = s.Resolver.LookupAddrs(ctx, r.Target)
			switch {
			case errors.Is(err, ErrNoRecords):
				continue // a target that does not exist serves nothing
			case err != nil:
				// Leaving its backends out would drain them for a
				// failure of the resolver: keep the last good set.
				return Answer{}, fmt.Errorf("%s: target %s: %w", s, r.Target, err)
			}
			ttl = min(ttl, attl)
		}
		w := int(r.Weight)
		if maxW > maxWeight {
			w = (w*maxWeight + int(maxW)/2) / int(maxW)
		}
		w = max(w, 1)
		for _, a := range addrs {
			ts = append(ts, Target{Addr: hostPort(a, int(r.Port)), Weight: w})
		}
	}
	if len(ts) == 0 {
		return Answer{}, fmt.Errorf("%s: %w (no target has an address)", s.Name, ErrNoRecords)
	}
	return Answer{Targets: tidy(ts), TTL: ttl}, nil
}

// tidy sorts targets by address and keeps the first of each address, so
// that answers that list the same records in another order (round-robin
// DNS) compare equal.
func tidy(ts []Target) []Target {
	slices.SortStableFunc(ts, func(a, b Target) int { return cmp.Compare(a.Addr, b.Addr) })
	return slices.CompactFunc(ts, func(a, b Target) bool { return a.Addr == b.Addr })
}

// File is a backends file (config.ParseBackends), read again when it
// changes.
//
// Each Fetch stats the file; it reads it only when its modification time,
// size or inode changed, or when it was modified so recently that a second
// write within the file system's timestamp granularity could hide behind
// an unchanged stat; it parses only what hashes differently from what it
// last read. Polling needs no dependency, costs one stat per interval, and
// sees what inotify-based watching misses: a file replaced by a rename
// (consul-template, most config management), a Kubernetes ConfigMap whose
// symlinks are swapped, a file on NFS.
type File struct {
	Path string

	// What the last Fetch saw.
	stamp   fileStamp
	sum     [sha256.Size]byte
	lastErr string
	seen    bool
}

// fileStamp is what a stat tells of a file's content.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// recentWrite is how recent a modification time is too recent to trust
// an unchanged stat: coarser than any timestamp granularity in use.
const recentWrite = 2 * time.Second

// String returns "file PATH".
func (f *File) String() string { return "file " + f.Path }

// Fetch reads the file when it may have changed. A file that did not
// change, or that fails again as it failed last time, gives errUnchanged.
func (f *File) Fetch(context.Context) (Answer, error) {
	fi, err := os.Stat(f.Path)
	if err != nil {
		return Answer{}, f.failed(err)
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	if f.seen && st == f.stamp && time.Since(st.mod) > recentWrite {
		return Answer{}, errUnchanged
	}
	data, err := config.ReadBackendsFile(f.Path, fi)
	if err != nil {
		return Answer{}, f.failed(err)
	}
	sum := sha256.Sum256(data)
	same := f.seen && sum == f.sum
	f.stamp, f.sum, f.seen = st, sum, true
	if same {
		return Answer{}, errUnchanged
	}
	list, err := config.ParseBackends(data, f.Path)
	if err != nil {
		f.lastErr = err.Error()
		return Answer{}, err
	}
	f.lastErr = ""
	if len(list) == 0 {
		return Answer{}, fmt.Errorf("%s: %w (an empty list)", f.Path, ErrNoRecords)
	}
	ts := make([]Target, 0, len(list))
	for _, b := range list {
		ts = append(ts, Target{Addr: canonical(b.Address), Weight: b.Weight})
	}
	return Answer{Targets: tidy(ts)}, nil
}

// failed returns err, or errUnchanged when the last Fetch failed the same
// way; the next good read is then parsed whatever its hash.
func (f *File) failed(err error) error {
	f.seen = false
	if err.Error() == f.lastErr {
		return errUnchanged
	}
	f.lastErr = err.Error()
	return err
}

// canonical writes an IP address the way hostPort does, so that a backend
// found by DNS and the same one listed in a file are one backend; host
// names stay as written.
func canonical(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return hostPort(ap.Addr(), int(ap.Port()))
}

// Describe lists targets for a log line: "10.0.0.1:80, 10.0.0.2:80
// weight 3".
func Describe(ts []Target) string {
	var b bytes.Buffer
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Addr)
		if t.Weight != 1 {
			b.WriteString(" weight ")
			b.WriteString(strconv.Itoa(t.Weight))
		}
	}
	return b.String()
}

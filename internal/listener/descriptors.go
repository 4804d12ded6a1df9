package listener

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Rlimit is how Helios reads and raises its descriptor limit
// (RLIMIT_NOFILE). The OS is reached through function fields so that tests
// can fake it.
type Rlimit struct {
	// Get returns the soft and hard limits.
	Get func() (soft, hard uint64, err error)
	// Set sets the soft and hard limits.
	Set func(soft, hard uint64) error
}

// SystemRlimit returns the Rlimit of this process.
func SystemRlimit() Rlimit {
	return Rlimit{
		Get: func() (uint64, uint64, error) {
			var r unix.Rlimit
			err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r)
			return uint64(r.Cur), uint64(r.Max), err
		},
		Set: func(soft, hard uint64) error {
			var r unix.Rlimit
			setLimit(&r.Cur, soft)
			setLimit(&r.Max, hard)
			return unix.Setrlimit(unix.RLIMIT_NOFILE, &r)
		},
	}
}

// DescriptorNeed is what a configuration asks of the descriptor limit.
type DescriptorNeed struct {
	// Clients is max_connections summed over the listeners. Each client
	// connection counts twice: its socket, and the backend connection or
	// file that serves it.
	Clients int
	// Fixed counts descriptors that do not grow with clients: listening
	// sockets, the admin listener.
	Fixed int
	// Reserve is kept back from clients for the admin API, health checks,
	// log files and reloads, so that they still get a descriptor when
	// clients take every slot.
	Reserve int
}

// Total returns the descriptors the configuration may use at most.
func (n DescriptorNeed) Total() uint64 { return uint64(2*n.Clients + n.Fixed + n.Reserve) }

// DescriptorPlan is what PlanDescriptors found and decided.
type DescriptorPlan struct {
	// Soft and Hard are RLIMIT_NOFILE after raising.
	Soft, Hard uint64
	// RaisedFrom is the soft limit before it was raised to Hard; 0 when it
	// was not.
	RaisedFrom uint64
	// RaiseErr is why the soft limit could not be raised, if it could not.
	RaiseErr error
	// Need is DescriptorNeed.Total.
	Need uint64
	// Clients is the client connections the listeners allow in all, and
	// ClientCap how many fit in Soft with the reserve kept (Clients when
	// all do; at least 1).
	Clients, ClientCap int
}

// PlanDescriptors raises the soft descriptor limit to the hard one, when it
// is lower, and works out how many client connections fit under it with
// need.Reserve kept back. It fails only when the limit cannot be read.
func PlanDescriptors(r Rlimit, need DescriptorNeed) (DescriptorPlan, error) {
	soft, hard, err := r.Get()
	if err != nil {
		return DescriptorPlan{}, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	p := DescriptorPlan{Soft: soft, Hard: hard, Need: need.Total(), Clients: need.Clients, ClientCap: need.Clients}
	if soft < hard {
		if err := r.Set(hard, hard); err != nil {
			p.RaiseErr = fmt.Errorf("raising RLIMIT_NOFILE from %d to %d: %w", soft, hard, err)
		} else {
			p.RaisedFrom, p.Soft = soft, hard
		}
	}
	if p.Short() {
		room := int64(p.Soft) - int64(need.Fixed+need.Reserve)
		p.ClientCap = int(max(room/2, 1))
	}
	return p, nil
}

// Short reports whether the soft limit is below what the configuration may
// use, so that client connections are capped below max_connections.
func (p DescriptorPlan) Short() bool { return p.Soft < p.Need }

// Cap returns the connection cap for a listener configured with
// maxConnections: maxConnections itself when the limit is enough, or else
// its share of ClientCap (at least 1).
func (p DescriptorPlan) Cap(maxConnections int) int {
	if !p.Short() || p.Clients <= 0 {
		return maxConnections
	}
	return max(int(int64(maxConnections)*int64(p.ClientCap)/int64(p.Clients)), 1)
}

// setLimit stores v in an rlimit field, whose type differs by system
// (uint64 on Linux, int64 on the BSDs).
func setLimit[T int64 | uint64](f *T, v uint64) { *f = T(v) }

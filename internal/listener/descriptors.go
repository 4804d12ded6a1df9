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
	// Clients is max_connections summed over the listeners.
	Clients int
	// Backends is what the backend pools can hold at most: the
	// connection caps summed, when every upstream has one
	// (BackendsCapped); otherwise each client may hold a backend
	// connection (or a file) too.
	Backends       int
	BackendsCapped bool
	// Fixed counts descriptors that do not grow with clients: listening
	// sockets, the admin listener.
	Fixed int
	// Reserve is kept back from clients for the admin API, health checks,
	// log files and reloads, so that they still get a descriptor when
	// clients take every slot.
	Reserve int
}

// Total returns the descriptors the configuration may use at most.
func (n DescriptorNeed) Total() uint64 {
	return uint64(n.Clients + n.backends() + n.Fixed + n.Reserve)
}

// backends returns what backend connections may hold: their caps, or one
// per client.
func (n DescriptorNeed) backends() int {
	if n.BackendsCapped {
		return min(n.Backends, n.Clients)
	}
	return n.Clients
}

// maxBackendFloor bounds the descriptors kept for backend connections
// that no cap bounds, when clients would take them (Budget).
const maxBackendFloor = 4096

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
	// ClientCap how many fit in Soft with the reserve and the backend
	// floor kept (Clients when all do; at least 1): the cap of the
	// process's Descriptors budget, which every listener draws on.
	Clients, ClientCap int
	// Room is the budget clients and backend connections share (0: no
	// limit), and Floor what of it clients leave to backend connections.
	Room, Floor int64
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
	room := max(int64(p.Soft)-int64(need.Fixed+need.Reserve), 1)
	if p.Soft >= 1<<40 {
		return p, nil // no limit worth the name
	}
	p.Room = room
	if need.BackendsCapped {
		p.Floor = min(int64(need.Backends), room/2)
	} else {
		p.Floor = min(room/4, maxBackendFloor)
	}
	p.ClientCap = int(min(int64(need.Clients), max(room-p.Floor, 1)))
	return p, nil
}

// Budget sets d to the plan: the room clients and backend connections
// share, and the floor clients leave to backend connections.
func (p DescriptorPlan) Budget(d *Descriptors) { d.Set(p.Room, p.Floor) }

// Short reports whether the listeners' max_connections together are more
// than the budget admits, so that clients may be refused below them.
func (p DescriptorPlan) Short() bool { return p.ClientCap < p.Clients }

// Cap returns how many client connections a listener configured with
// maxConnections can have at most: maxConnections, or the budget's cap
// when that is lower. Listeners share the budget: one may take what
// others leave, up to its own max_connections.
func (p DescriptorPlan) Cap(maxConnections int) int {
	if !p.Short() || maxConnections <= 0 {
		return maxConnections
	}
	return min(maxConnections, max(p.ClientCap, 1))
}

// setLimit stores v in an rlimit field, whose type differs by system
// (uint64 on Linux, int64 on the BSDs).
func setLimit[T int64 | uint64](f *T, v uint64) { *f = T(v) }

package listener

import "sync/atomic"

// Descriptors is the process's descriptor budget, shared by every
// listener's client connections and every connection to a backend: the
// descriptors RLIMIT_NOFILE leaves once the listening sockets, files and
// a reserve are set aside. Clients are admitted up to the budget less a
// floor kept for backend connections; a backend connection is opened only
// while the budget has room (otherwise its request waits for one to
// close), so the process does not run out of descriptors in the middle
// of a request, and no listener is held to a share of the limit while
// another leaves its share unused. Backend connections may use what
// clients leave; when clients come back for it (Squeezed), idle backend
// connections close rather than wait in their pools, and the reserve
// covers the moment between. The zero value has no limit. It is safe for
// concurrent use.
type Descriptors struct {
	room      atomic.Int64 // clients and backends together; <= 0: no limit
	clientMax atomic.Int64 // clients alone: room less the backend floor
	clients   atomic.Int64
	backends  atomic.Int64
	refused   atomic.Uint64
	waited    atomic.Uint64
}

// Set sets the budget: room descriptors for clients and backend
// connections together, of which floor stay for backend connections when
// clients would take them all. room <= 0 removes the limit.
func (d *Descriptors) Set(room, floor int64) {
	if room <= 0 {
		d.room.Store(0)
		d.clientMax.Store(0)
		return
	}
	d.room.Store(room)
	d.clientMax.Store(max(room-floor, 1))
}

// AdmitClient counts a client connection; false when clients hold all
// the budget allows them (the caller closes it and does not call
// ReleaseClient).
func (d *Descriptors) AdmitClient() bool {
	n := d.clients.Add(1)
	if m := d.clientMax.Load(); m > 0 && n > m {
		d.clients.Add(-1)
		d.refused.Add(1)
		return false
	}
	return true
}

// Squeezed reports whether clients and backend connections together
// hold more than the budget (backend connections took room clients now
// want back): idle backend connections should close.
func (d *Descriptors) Squeezed() bool {
	r := d.room.Load()
	return r > 0 && d.clients.Load()+d.backends.Load() > r
}

// ReleaseClient ends a client connection AdmitClient counted.
func (d *Descriptors) ReleaseClient() { d.clients.Add(-1) }

// TakeBackend counts a backend connection about to be opened; false when
// the budget has no room (the request waits for one to close, and the
// caller does not call ReleaseBackend).
func (d *Descriptors) TakeBackend() bool {
	n := d.backends.Add(1)
	if r := d.room.Load(); r > 0 && n+d.clients.Load() > r {
		d.backends.Add(-1)
		d.waited.Add(1)
		return false
	}
	return true
}

// ReleaseBackend ends a backend connection TakeBackend counted.
func (d *Descriptors) ReleaseBackend() { d.backends.Add(-1) }

// DescriptorStats is what the budget holds and has refused.
type DescriptorStats struct {
	// Room is the budget (0: no limit); ClientMax what clients alone may
	// take of it.
	Room, ClientMax int64
	// Clients and Backends are the connections counted now.
	Clients, Backends int64
	// Refused counts clients closed for want of room; Waited counts
	// backend connections put off for want of room (their requests
	// waited for one to close).
	Refused, Waited uint64
}

// Stats returns what the budget holds and has done.
func (d *Descriptors) Stats() DescriptorStats {
	return DescriptorStats{
		Room: d.room.Load(), ClientMax: d.clientMax.Load(),
		Clients: d.clients.Load(), Backends: d.backends.Load(),
		Refused: d.refused.Load(), Waited: d.waited.Load(),
	}
}

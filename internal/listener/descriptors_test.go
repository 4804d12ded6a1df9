package listener

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/clock"
)

// fakeRlimit is an RLIMIT_NOFILE that records what was set.
type fakeRlimit struct {
	soft, hard uint64
	setErr     error
	sets       int
}

func (f *fakeRlimit) rlimit() Rlimit {
	return Rlimit{
		Get: func() (uint64, uint64, error) { return f.soft, f.hard, nil },
		Set: func(soft, hard uint64) error {
			f.sets++
			if f.setErr != nil {
				return f.setErr
			}
			f.soft, f.hard = soft, hard
			return nil
		},
	}
}

func TestPlanDescriptors(t *testing.T) {
	need := DescriptorNeed{Clients: 20000, Fixed: 3, Reserve: 131} // needs 40134
	tests := []struct {
		name       string
		soft, hard uint64
		setErr     error
		want       DescriptorPlan
		wantCap    int // of a listener with max_connections 5000
	}{
		{
			name: "enough", soft: 65536, hard: 65536,
			want:    DescriptorPlan{Soft: 65536, Hard: 65536, Need: 40134, Clients: 20000, ClientCap: 20000, Room: 65402, Floor: 4096},
			wantCap: 5000,
		},
		{
			name: "raised to the hard limit", soft: 1024, hard: 1 << 20,
			want:    DescriptorPlan{Soft: 1 << 20, Hard: 1 << 20, RaisedFrom: 1024, Need: 40134, Clients: 20000, ClientCap: 20000, Room: 1048442, Floor: 4096},
			wantCap: 5000,
		},
		{
			// Clients take all but the floor: one listener may have its
			// 5000 however many the others are configured for.
			name: "short even raised", soft: 1024, hard: 20000,
			want:    DescriptorPlan{Soft: 20000, Hard: 20000, RaisedFrom: 1024, Need: 40134, Clients: 20000, ClientCap: 15770, Room: 19866, Floor: 4096},
			wantCap: 5000,
		},
		{
			name: "raising refused", soft: 1024, hard: 4096, setErr: syscall.EPERM,
			want:    DescriptorPlan{Soft: 1024, Hard: 4096, Need: 40134, Clients: 20000, ClientCap: 668, Room: 890, Floor: 222},
			wantCap: 668,
		},
		{
			name: "below the reserve", soft: 100, hard: 100,
			want:    DescriptorPlan{Soft: 100, Hard: 100, Need: 40134, Clients: 20000, ClientCap: 1, Room: 1, Floor: 0},
			wantCap: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRlimit{soft: tt.soft, hard: tt.hard, setErr: tt.setErr}
			got, err := PlanDescriptors(f.rlimit(), need)
			if err != nil {
				t.Fatal(err)
			}
			if (got.RaiseErr != nil) != (tt.setErr != nil) {
				t.Errorf("got RaiseErr %v, want one: %v", got.RaiseErr, tt.setErr != nil)
			}
			got.RaiseErr = nil
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if c := got.Cap(5000); c != tt.wantCap {
				t.Errorf("got cap %d for max_connections 5000, want %d", c, tt.wantCap)
			}
			if got.Soft != f.soft {
				t.Errorf("got soft limit %d in the plan, %d in the OS", got.Soft, f.soft)
			}
		})
	}
}

// TestPlanDescriptorsCappedBackends: pools with connection caps need
// only what the caps allow, not one backend connection per client.
func TestPlanDescriptorsCappedBackends(t *testing.T) {
	need := DescriptorNeed{Clients: 10000, Backends: 1024, BackendsCapped: true, Fixed: 10, Reserve: 140}
	f := &fakeRlimit{soft: 20000, hard: 20000}
	p, err := PlanDescriptors(f.rlimit(), need)
	if err != nil {
		t.Fatal(err)
	}
	if p.Need != 11174 || p.Short() || p.ClientCap != 10000 || p.Floor != 1024 || p.Room != 19850 {
		t.Errorf("got need %d, short %v, client cap %d, floor %d, room %d; want 11174, false, 10000, 1024, 19850", p.Need, p.Short(), p.ClientCap, p.Floor, p.Room)
	}
}

// TestDescriptors: clients take the budget but for the floor, backend
// connections the rest, and every listener draws on the one budget.
func TestDescriptors(t *testing.T) {
	var d Descriptors
	d.Set(10, 3)
	for i := 0; i < 7; i++ {
		if !d.AdmitClient() {
			t.Fatalf("client %d: refused, want admitted (cap 7)", i+1)
		}
	}
	if d.AdmitClient() {
		t.Errorf("8th client: admitted past room less floor")
	}
	for i := 0; i < 3; i++ {
		if !d.TakeBackend() {
			t.Fatalf("backend %d: refused, want taken (room 10, 7 clients)", i+1)
		}
	}
	if d.TakeBackend() {
		t.Errorf("4th backend: taken past the room")
	}
	d.ReleaseClient()
	if !d.TakeBackend() {
		t.Errorf("after a client left: backend refused, want taken")
	}
	if d.Squeezed() {
		t.Errorf("squeezed at the room, want only past it")
	}
	if !d.AdmitClient() {
		t.Errorf("a client back under its cap while backends use its room: refused, want admitted")
	}
	if !d.Squeezed() {
		t.Errorf("clients and backends past the room: not squeezed, want squeezed")
	}
	s := d.Stats()
	if s.Clients != 7 || s.Backends != 4 || s.Refused != 1 || s.Waited != 1 {
		t.Errorf("got %+v, want 7 clients, 4 backends, 1 refused, 1 waited", s)
	}
	var none Descriptors
	for i := 0; i < 100; i++ {
		if !none.AdmitClient() || !none.TakeBackend() {
			t.Fatalf("no limit: refused")
		}
	}
}

// TestPoolsShareDescriptors: two listeners draw on one budget, so one
// takes what the other leaves.
func TestPoolsShareDescriptors(t *testing.T) {
	var d Descriptors
	d.Set(4, 0)
	a, b := &Pool{}, &Pool{}
	a.SetMaxConnections(10)
	b.SetMaxConnections(10)
	a.SetDescriptors(&d)
	b.SetDescriptors(&d)
	for i := 0; i < 4; i++ {
		if !a.Admit() {
			t.Fatalf("a: client %d refused", i+1)
		}
	}
	if b.Admit() {
		t.Errorf("b: admitted past the shared budget")
	}
	a.Release()
	if !b.Admit() {
		t.Errorf("b: refused with room left by a")
	}
}

func TestPlanDescriptorsGetFails(t *testing.T) {
	r := Rlimit{Get: func() (uint64, uint64, error) { return 0, 0, syscall.ENOSYS }}
	if _, err := PlanDescriptors(r, DescriptorNeed{Clients: 1}); !errors.Is(err, syscall.ENOSYS) {
		t.Errorf("got %v, want ENOSYS", err)
	}
}

func TestAcceptErrorsRateLimited(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	type warning struct {
		reason     string
		suppressed uint64
	}
	var warnings []warning
	a := NewAcceptErrors(fc, 10*time.Second, func(_ error, reason string, suppressed uint64) {
		warnings = append(warnings, warning{reason, suppressed})
	})
	emfile := fmt.Errorf("accept4: %w", syscall.EMFILE)
	// 1,170 failures in 30 s, as in issue 9.
	for i := 0; i < 1170; i++ {
		a.Observe(emfile)
		fc.Advance(30 * time.Second / 1170)
	}
	fc.Advance(10 * time.Second)
	a.Observe(syscall.ENFILE)
	a.Observe(syscall.ECONNRESET)
	// One warning per 10 s, each with the failures it stood for.
	want := []warning{{"emfile", 0}, {"emfile", 390}, {"emfile", 390}, {"enfile", 387}}
	if fmt.Sprint(warnings) != fmt.Sprint(want) {
		t.Errorf("got warnings %v, want %v", warnings, want)
	}
	for _, c := range []struct {
		reason string
		want   uint64
	}{{"emfile", 1170}, {"enfile", 1}, {"enobufs", 0}, {"other", 1}} {
		if got := a.Count(c.reason); got != c.want {
			t.Errorf("got %d %s, want %d", got, c.reason, c.want)
		}
	}
}

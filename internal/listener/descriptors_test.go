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
			want:    DescriptorPlan{Soft: 65536, Hard: 65536, Need: 40134, Clients: 20000, ClientCap: 20000},
			wantCap: 5000,
		},
		{
			name: "raised to the hard limit", soft: 1024, hard: 1 << 20,
			want:    DescriptorPlan{Soft: 1 << 20, Hard: 1 << 20, RaisedFrom: 1024, Need: 40134, Clients: 20000, ClientCap: 20000},
			wantCap: 5000,
		},
		{
			name: "short even raised", soft: 1024, hard: 20000,
			want:    DescriptorPlan{Soft: 20000, Hard: 20000, RaisedFrom: 1024, Need: 40134, Clients: 20000, ClientCap: 9933},
			wantCap: 2483,
		},
		{
			name: "raising refused", soft: 1024, hard: 4096, setErr: syscall.EPERM,
			want:    DescriptorPlan{Soft: 1024, Hard: 4096, Need: 40134, Clients: 20000, ClientCap: 445},
			wantCap: 111,
		},
		{
			name: "below the reserve", soft: 100, hard: 100,
			want:    DescriptorPlan{Soft: 100, Hard: 100, Need: 40134, Clients: 20000, ClientCap: 1},
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

package upstream

import (
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/clock"
)

var testStart = time.Unix(1_000_000, 0)

// TestRampIsLinear checks that a backend's ramp grows linearly from 0 to
// RampFull over its slow start window, and that without a window, or once
// it is over, it is full.
func TestRampIsLinear(t *testing.T) {
	clk := clock.NewFake(testStart)
	b := &Backend{State: NewState(clk), Weight: 1, SlowStart: 10 * time.Second}
	if got := b.Ramp(); got != RampFull {
		t.Fatalf("never out of rotation: got %v, want %v", got, RampFull)
	}
	b.StartRamp(clk.Now())
	for tenth := 0; tenth < 10; tenth++ {
		want := uint32(tenth * RampFull / 10)
		if got := b.Ramp(); got != want {
			t.Errorf("at %d/10: got %v, want %v", tenth, got, want)
		}
		clk.Advance(time.Second)
	}
	if got := b.Ramp(); got != RampFull {
		t.Errorf("at the end: got %v, want %v", got, RampFull)
	}
	off := &Backend{State: NewState(clk), Weight: 1}
	off.StartRamp(clk.Now())
	if got := off.Ramp(); got != RampFull {
		t.Errorf("without slow start: got %v, want %v", got, RampFull)
	}
}

// TestRampStarts checks which changes of state start a slow start: up from
// down, the end of an ejection (when it runs out, or when it is cleared
// early), and not a backend that was up all along.
func TestRampStarts(t *testing.T) {
	const window = 10 * time.Second
	tests := []struct {
		name string
		// act changes the state at testStart; then the clock moves 2s.
		act  func(s *State, clk *clock.Fake)
		want uint32
	}{
		{name: "up all along", act: func(s *State, _ *clock.Fake) { s.SetDown(false) }, want: RampFull},
		{name: "up from down", act: func(s *State, _ *clock.Fake) { s.SetDown(true); s.SetDown(false) }, want: RampFull / 5},
		{name: "still down", act: func(s *State, _ *clock.Fake) { s.SetDown(true) }, want: RampFull},
		{
			name: "ejection runs out",
			act:  func(s *State, clk *clock.Fake) { s.Eject(clk.Now().Add(-time.Second)) },
			want: RampFull * 3 / 10,
		},
		{
			name: "ejection cleared early",
			act:  func(s *State, clk *clock.Fake) { s.Eject(clk.Now().Add(time.Minute)); s.ClearEjection() },
			want: RampFull / 5,
		},
		{
			name: "ejection cleared after it ran out",
			act:  func(s *State, clk *clock.Fake) { s.Eject(clk.Now().Add(-time.Second)); s.ClearEjection() },
			want: RampFull * 3 / 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(testStart)
			b := &Backend{State: NewState(clk), Weight: 1, SlowStart: window}
			tt.act(b.State, clk)
			clk.Advance(2 * time.Second)
			if got := b.Ramp(); got != tt.want {
				t.Errorf("ramp: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAdminState checks that drained, disabled and removed backends are
// out of rotation, that enabling brings a drained or disabled one back,
// and that the admin state does not disturb health flags.
func TestAdminState(t *testing.T) {
	tests := []struct {
		name      string
		set       func(*State)
		available bool
		admin     AdminState
	}{
		{name: "new", set: func(*State) {}, available: true, admin: AdminEnabled},
		{name: "draining", set: func(s *State) { s.SetAdmin(AdminDraining) }, admin: AdminDraining},
		{name: "disabled", set: func(s *State) { s.SetAdmin(AdminDisabled) }, admin: AdminDisabled},
		{name: "drained then disabled", set: func(s *State) { s.SetAdmin(AdminDraining); s.SetAdmin(AdminDisabled) }, admin: AdminDisabled},
		{name: "disabled then enabled", set: func(s *State) { s.SetAdmin(AdminDisabled); s.SetAdmin(AdminEnabled) }, available: true, admin: AdminEnabled},
		{name: "removed", set: func(s *State) { s.SetRemoved() }, admin: AdminEnabled},
		{name: "down, drained, enabled", set: func(s *State) { s.SetDown(true); s.SetAdmin(AdminDraining); s.SetAdmin(AdminEnabled) }, admin: AdminEnabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewState(nil)
			tt.set(s)
			if got := s.Available(); got != tt.available {
				t.Errorf("Available: got %v, want %v", got, tt.available)
			}
			if got := s.Admin(); got != tt.admin {
				t.Errorf("Admin: got %v, want %v", got, tt.admin)
			}
		})
	}
	s := NewState(nil)
	s.SetDown(true)
	s.SetAdmin(AdminDraining)
	s.SetAdmin(AdminEnabled)
	if !s.Down() {
		t.Errorf("got a backend marked down brought up by enable, want still down")
	}
	if s.SetWeightOverride(7); s.WeightOverride() != 7 {
		t.Errorf("got weight override %d, want 7", s.WeightOverride())
	}
}

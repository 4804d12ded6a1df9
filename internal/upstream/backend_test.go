package upstream

import "testing"

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

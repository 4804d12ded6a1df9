package h2

import (
	"testing"

	"github.com/helios-lb/helios/internal/h2/h2spectest"
)

// TestH2SpecConformance runs every h2spec case (h2c, prior knowledge)
// against a server Conn behind the test driver. Listener tests run the
// same suite against real listeners with h2spectest.Run.
func TestH2SpecConformance(t *testing.T) {
	addr := startTestServer(t, Config{})
	h2spectest.Run(t, addr, h2spectest.Options{})
}

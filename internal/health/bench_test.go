package health

import (
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/proxy"
)

func BenchmarkGuardAdmitDone(b *testing.B) {
	bs, ts := backends(nil, 3)
	g := applied("app", bs, ts, &PassivePolicy{MaxFails: 3, FailWindow: 10 * time.Second, EjectFor: 30 * time.Second, MaxEjectFor: time.Minute},
		&BreakerPolicy{ConsecutiveFailures: 5, FailureRatio: 0.5, MinRequests: 20, Interval: 10 * time.Second, OpenFor: 10 * time.Second, HalfOpenRequests: 1})
	b.ReportAllocs()
	for b.Loop() {
		tk, ok := g.Admit(bs[0])
		if ok {
			g.Done(bs[0], tk, proxy.Success)
		}
	}
}

package config

import (
	"testing"
	"time"
)

// TestRetriesBackoffDefaults checks that an absent backoff block leaves
// retries immediate, that an empty one gets 25ms and 250ms, and that
// per_try_timeout defaults to no bound.
func TestRetriesBackoffDefaults(t *testing.T) {
	cfg := mustParse(t, `listeners: [{name: web, address: ":80"}]
routes: [{name: a, upstream: app}]
upstreams:
  - {name: app, backends: [{address: "127.0.0.1:9000"}]}
  - {name: b, backends: [{address: "127.0.0.1:9001"}], retries: {backoff: {}}}
  - {name: c, backends: [{address: "127.0.0.1:9002"}], retries: {backoff: {base: 10ms}, per_try_timeout: 2s}}
`, nil)
	if r := cfg.Upstreams[0].Retries; r.Backoff != nil || r.PerTryTimeout != 0 {
		t.Errorf("absent: got backoff %+v, per_try_timeout %v; want nil, 0", r.Backoff, r.PerTryTimeout)
	}
	if b := cfg.Upstreams[1].Retries.Backoff; b == nil || b.Base.D() != 25*time.Millisecond || b.Max.D() != 250*time.Millisecond {
		t.Errorf("backoff: {}: got %+v, want base 25ms, max 250ms", b)
	}
	r := cfg.Upstreams[2].Retries
	if b := r.Backoff; b.Base.D() != 10*time.Millisecond || b.Max.D() != 250*time.Millisecond || r.PerTryTimeout.D() != 2*time.Second {
		t.Errorf("got backoff %+v, per_try_timeout %v; want base 10ms, max 250ms, 2s", b, r.PerTryTimeout)
	}
}

func TestRetriesProblems(t *testing.T) {
	const head = "listeners: [{name: web, address: \":80\"}]\nroutes: [{name: a, upstream: app}]\nupstreams:\n  - name: app\n    backends: [{address: \"127.0.0.1:9000\"}]\n    retries:\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "backoff base 0",
			yaml: head + "      backoff: {base: 0}\n",
			want: `t.yaml:7: upstreams[0].retries.backoff.base: 0s is out of range (1ms-1m, such as 25ms)`,
		},
		{
			name: "backoff base over a minute",
			yaml: head + "      backoff: {base: 2m, max: 2m}\n",
			want: "t.yaml:7: upstreams[0].retries.backoff.base: 2m0s is out of range (1ms-1m, such as 25ms)\n" +
				"t.yaml:7: upstreams[0].retries.backoff.max: 2m0s is out of range (base 2m0s-1m, such as 250ms)",
		},
		{
			name: "backoff max below base",
			yaml: head + "      backoff:\n        base: 100ms\n        max: 50ms\n",
			want: `t.yaml:9: upstreams[0].retries.backoff.max: 50ms is out of range (base 100ms-1m, such as 250ms)`,
		},
		{
			name: "backoff default max below base",
			yaml: head + "      backoff: {base: 1s}\n",
			want: `t.yaml:7: upstreams[0].retries.backoff.max: 250ms is out of range (base 1s-1m, such as 250ms)`,
		},
		{
			name: "negative per_try_timeout",
			yaml: head + "      per_try_timeout: -1s\n",
			want: `t.yaml:7: upstreams[0].retries.per_try_timeout: -1s is out of range (0-1h, such as 2s; 0 for no bound)`,
		},
		{
			name: "backoff unknown key",
			yaml: head + "      backoff: {factor: 2}\n",
			want: `t.yaml:7: upstreams[0].retries.backoff.factor: unknown key (allowed: base, max)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, nil)
			if got := ps.Error(); got != tt.want {
				t.Errorf("got\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

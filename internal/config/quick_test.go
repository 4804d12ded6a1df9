package config

import "testing"

func TestQuick(t *testing.T) {
	tests := []struct {
		name string
		q    Quick
		want string // the problems, or "" for a valid config
	}{
		{name: "minimal", q: Quick{From: ":8080", To: []string{"127.0.0.1:9001"}}},
		{name: "everything", q: Quick{From: "127.0.0.1:8080", To: []string{"127.0.0.1:9001", " 127.0.0.1:9002"}, Strategy: "least_conn", HealthPath: "/healthz", Admin: "off", AccessLog: "off"}},
		{name: "bad backend", q: Quick{From: ":8080", To: []string{"127.0.0.1:9001", "localhost"}},
			want: `--to[1]: "localhost" is not host:port (host:port such as :8080, 127.0.0.1:8080 or [::1]:8080; port 1-65535)`},
		{name: "no backend", q: Quick{From: ":8080"},
			want: "--to: missing (one or more backend addresses, comma-separated, such as 127.0.0.1:9001,127.0.0.1:9002)"},
		{name: "bad strategy and health path", q: Quick{From: ":8080", To: []string{"127.0.0.1:9001"}, Strategy: "fastest", HealthPath: "healthz"},
			want: `--health: "healthz" does not start with / (a path such as /healthz)` + "\n" +
				`--strategy: "fastest" is not a strategy (round_robin, weighted_round_robin, least_conn, consistent_hash, ip_hash, random, p2c)`},
		{name: "no listener", q: Quick{To: []string{"127.0.0.1:9001"}},
			want: "--from: missing (host:port such as :8080, 127.0.0.1:8080 or [::1]:8080; port 1-65535)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.q.Config()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Fatalf("got\n%v\nwant\n%v", got, tt.want)
			}
			if err == nil && (cfg.Upstreams[0].Strategy == "" || cfg.Listeners[0].Sockets == 0) {
				t.Errorf("defaults not applied: %+v", cfg.Upstreams[0])
			}
		})
	}
}

package config

import "testing"

func TestAccessFormat(t *testing.T) {
	const head = "listeners: [{name: web, address: \":80\"}]\nroutes: [{name: r, respond: {}}]\n"
	tests := []struct {
		name    string
		logging string
		want    string // the resolved format, or the problem
	}{
		{"follows json", "logging: {format: json}\n", "json"},
		{"follows console", "logging: {format: console}\n", "console"},
		{"combined", "logging: {format: json, access_format: combined}\n", "combined"},
		{"unknown", "logging:\n  access_format: common\n", `t.yaml:4: logging.access_format: "common" is not an access log format (json, console, combined)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, ps := parseProblems(t, head+tt.logging, nil)
			got := ""
			if ps != nil {
				got = ps.Error()
			} else {
				got = cfg.Logging.AccessLineFormat()
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

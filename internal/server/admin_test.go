package server

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestInsecureAdminWarnsAtStart guards issue 9 item 8: an admin listener
// without a token on an address other hosts can reach is allowed only
// with admin.insecure_no_token, and then Helios says so at every start.
func TestInsecureAdminWarnsAtStart(t *testing.T) {
	tests := []struct {
		name  string
		admin string
		want  int
	}{
		{name: "opted out", admin: `{address: "0.0.0.0:9901", insecure_no_token: true}`, want: 1},
		{name: "token", admin: `{address: "0.0.0.0:9901", token: s3cret-s3cret-s3cret}`, want: 0},
		{name: "loopback", admin: `{address: "127.0.0.1:9901"}`, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			// yamlConfig moves the admin listener to 127.0.0.1:0 after
			// validation: tests bind loopback only.
			cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: ping, respond: {status: 200}}]
admin: `+tt.admin+"\n", nil)
			startServer(t, cfg, Options{Logger: zap.New(core)})
			if got := logs.FilterMessageSnippet("admin.insecure_no_token").Len(); got != tt.want {
				t.Errorf("got %d warnings about insecure_no_token, want %d; log: %v", got, tt.want, logs.All())
			}
		})
	}
}

package admin

import (
	"context"
	"net/http"
	"testing"
)

type fakeSource struct{}

func (fakeSource) Ready() (bool, string)     { return true, "" }
func (fakeSource) Upstreams() []Upstream     { return nil }
func (fakeSource) Listeners() []Listener     { return nil }
func (fakeSource) Reload() ([]string, error) { return nil, nil }
func (fakeSource) ChangeBackend(string, string, BackendChange) (Backend, error) {
	return Backend{}, ErrNotFound
}

// TestBearerSchemeIsCaseInsensitive guards issue 9 item 8: the scheme of
// an Authorization header is case-insensitive (RFC 9110, section 11.1),
// and a client sending "bearer TOKEN" was refused.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	s, err := Listen("127.0.0.1:0", fakeSource{}, Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	url := "http://" + s.Addr().String() + "/api/v1/upstreams"
	tests := []struct {
		name   string
		header string
		want   int
	}{
		{name: "Bearer", header: "Bearer s3cret", want: 200},
		{name: "lower case", header: "bearer s3cret", want: 200},
		{name: "upper case", header: "BEARER s3cret", want: 200},
		{name: "two spaces", header: "Bearer  s3cret", want: 200},
		{name: "wrong token", header: "bearer s3cre", want: 401},
		{name: "no space", header: "Bearers3cret", want: 401},
		{name: "other scheme", header: "Basic s3cret", want: 401},
		{name: "scheme only", header: "Bearer", want: 401},
		{name: "none", header: "", want: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", url, nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("got %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

package admin

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Check asks the admin listener at address for path (/readyz or
// /healthz) and returns its answer ("ready", "ok") on 200, or an error
// saying what it answered:
// the client side of the probes, for a container HEALTHCHECK or a
// Kubernetes exec probe in an image without curl. An address with an
// empty or unspecified host (":9901", "0.0.0.0:9901") is asked on
// loopback.
func Check(ctx context.Context, address, path string) (string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("admin address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "helios-healthcheck")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	answer := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, answer)
	}
	return answer, nil
}

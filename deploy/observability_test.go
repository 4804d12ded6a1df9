package deploy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

// TestAlertRules runs promtool check rules and the rules' unit tests.
func TestAlertRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	dir := filepath.Join(repoRoot(t), "deploy/observability")
	run(t, dir, nil, promtool, "check", "rules", "alerts.yaml")
	run(t, dir, nil, promtool, "test", "rules", "alerts_test.yaml")
}

// dashboardExprs returns every query of the Grafana dashboard, with
// Grafana's variables replaced so that PromQL tools read them.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy/observability/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	r := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	var out []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, r.Replace(tg.Expr))
		}
	}
	return out
}

// TestDashboardQueriesParse hands every dashboard query to promtool as a
// recording rule: a typo in PromQL fails here, not in Grafana.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	os.WriteFile(f, []byte(b.String()), 0o644)
	run(t, "", nil, promtool, "check", "rules", f)
}

var metricName = regexp.MustCompile(`\bhelios_[a-z0-9_]+`)

// TestKitUsesMetricsHeliosExports scrapes a running helios and checks
// that every metric the dashboard and the alerts name is one it exports
// (or one pending, listed above), and that the dashboard shows what
// issue 12 asks of it.
func TestKitUsesMetricsHeliosExports(t *testing.T) {
	exported := scrapeMetricNames(t)
	used := map[string]bool{}
	for _, e := range dashboardExprs(t) {
		for _, n := range metricName.FindAllString(e, -1) {
			used[n] = true
		}
	}
	dashboard := map[string]bool{}
	for n := range used {
		dashboard[n] = true
	}
	alerts, _ := os.ReadFile(filepath.Join(repoRoot(t), "deploy/observability/alerts.yaml"))
	for _, n := range metricName.FindAllString(string(alerts), -1) {
		used[n] = true
	}
	// Series that exist only once there is something to measure, and the
	// test that scrapes them then.
	onlyWith := map[string]string{
		"helios_acme_certificate_expiry_seconds": "an ACME certificate (TestACMEHTTP01IssuesAndRestartLoadsFromStorage in internal/server scrapes it)",
		"helios_rate_limit_store_fallback":       "a rate limit with a store (TestSharedRateLimitStoreOutage in internal/server scrapes it)",
	}
	var missing []string
	for n := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !exported[n] && !exported[base] && onlyWith[n] == "" {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the kit names metrics Helios does not export: %v", missing)
	}
	for _, want := range []string{
		"helios_requests_total", "helios_request_duration_seconds_bucket", "helios_backend_up",
		"helios_backend_ejected", "helios_circuit_breaker_state", "helios_open_connections",
		"helios_config_reloads_total", "helios_config_last_reload_success_timestamp_seconds", "helios_build_info",
		// TLS and HTTP/2 (issue 18 item 11: the dashboard had no panel for either).
		"helios_tls_handshakes_total", "helios_tls_certificate_expiry_seconds", "helios_requests_by_protocol_total",
		"helios_http2_streams_total", "helios_http2_stream_resets_total", "helios_http2_limit_closes_total",
	} {
		if !dashboard[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// scrapeMetricNames runs helios serve with health checks, passive
// ejection and a breaker on, sends it a request, and returns the metric
// names /metrics lists.
func scrapeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	dir := t.TempDir()
	bin := buildHelios(t, dir)
	web, tlsPort, acmePort, admin, backend := freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)
	cert, err := certgen.SelfSigned(certgen.Request{Hosts: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := cert.WriteFiles(dir, "site")
	if err != nil {
		t.Fatal(err)
	}
	b := exec.Command(bin, "backend", "--listen", "127.0.0.1:"+backend)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { b.Process.Kill(); b.Wait() }()
	cfg := filepath.Join(dir, "helios.yaml")
	// A TLS listener too: the certificate alert's series; and one with
	// ACME (against a CA that is not there: its orders fail).
	os.WriteFile(cfg, []byte(`listeners:
  - {name: web, address: "127.0.0.1:`+web+`"}
  - {name: tls, address: "127.0.0.1:`+tlsPort+`", tls: {cert_file: "`+certFile+`", key_file: "`+keyFile+`"}}
  - {name: acme, address: "127.0.0.1:`+acmePort+`", tls: {acme: {ca: "https://127.0.0.1:1/dir", storage: "`+filepath.Join(dir, "acme")+`", domains: [metrics.example]}}}
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:`+backend+`"}]
    health_check: {interval: 1s}
    passive: {}
    circuit_breaker: {}
admin: {address: "127.0.0.1:`+admin+`"}
`), 0o644)
	s := exec.Command(bin, "serve", "--config", cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { s.Process.Kill(); s.Wait() }()
	// An HTTP/2 request over TLS, so that the TLS and HTTP/2 series
	// have values.
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}}
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://127.0.0.1:" + web + "/"); err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			if resp, err := h2.Get("https://127.0.0.1:" + tlsPort + "/"); err == nil {
				resp.Body.Close()
			}
			if m, err := http.Get("http://127.0.0.1:" + admin + "/metrics"); err == nil {
				bb, _ := io.ReadAll(m.Body)
				m.Body.Close()
				body = string(bb)
				if strings.Contains(body, "helios_health_checks_total") {
					break
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if n, ok := strings.CutPrefix(line, "# TYPE "); ok {
			names[strings.Fields(n)[0]] = true
		}
	}
	if !names["helios_requests_total"] {
		t.Fatalf("no helios metrics scraped:\n%s", body)
	}
	return names
}

// Package h2spectest runs h2spec, the HTTP/2 conformance suite
// (github.com/summerwind/h2spec, a tool of this module: `go tool
// h2spec`), against a server from a Go test, and fails the test for
// every case that does not pass. The h2 package runs it against its
// test driver; a listener test can run it against a real listener:
//
//	h2spectest.Run(t, ln.Addr().String(), h2spectest.Options{TLS: true})
//
// The served path ("/" unless Options.Path says otherwise) must answer
// GET with a non-empty body of at least five bytes: some cases watch
// that body cross flow-control windows of one to three bytes.
package h2spectest

import (
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Options shape a run. The zero value runs every case over cleartext
// (h2c with prior knowledge).
type Options struct {
	// TLS connects with TLS and ALPN h2, without verifying the
	// server's certificate.
	TLS bool
	// Strict also runs h2spec's strict cases (-S).
	Strict bool
	// Specs limits the run to these sections, e.g. "http2/6.5" or
	// "hpack"; none means all.
	Specs []string
	// Path is the path requested; empty means "/".
	Path string
	// CaseTimeout is h2spec's wait for an expected frame (-o);
	// zero means 2s, h2spec's default.
	CaseTimeout time.Duration
	// RunTimeout bounds the whole run; zero means 2 minutes.
	RunTimeout time.Duration
}

// Result is what a run found.
type Result struct {
	// Tests, Passed, Skipped and Failed count the cases run.
	Tests, Passed, Skipped, Failed int
	// Failures names each case that failed or erred, with h2spec's
	// expected and actual.
	Failures []string
	// Output is h2spec's console output.
	Output string
}

// Binary returns the path of the h2spec binary, building it with the
// go command if need be (`go tool -n h2spec`).
func Binary(ctx context.Context) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// Only stdout is the path: on a new machine the go command also says
	// on stderr which modules it downloads.
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, goBin, "tool", "-n", "h2spec")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building h2spec: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Run runs h2spec against addr (host:port) and fails t for each case
// that does not pass, and for skipped ones (a skip means the server
// did not offer what a case needs). It skips t when h2spec cannot be
// built here (no module cache and no network, say).
func Run(t testing.TB, addr string, o Options) Result {
	t.Helper()
	runTimeout := o.RunTimeout
	if runTimeout <= 0 {
		runTimeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	bin, err := Binary(ctx)
	if err != nil {
		t.Skipf("h2spec unavailable: %v", err)
	}
	res, err := RunBinary(ctx, bin, addr, o)
	if err != nil {
		t.Fatalf("h2spec: %v\n%s", err, res.Output)
	}
	for _, f := range res.Failures {
		t.Errorf("h2spec: %s", f)
	}
	if res.Skipped > 0 {
		t.Errorf("h2spec skipped %d cases; got %d skipped, want 0\n%s", res.Skipped, res.Skipped, res.Output)
	}
	if res.Tests == 0 {
		t.Errorf("h2spec ran no case\n%s", res.Output)
	}
	t.Logf("h2spec %s: %d cases, %d passed, %d skipped, %d failed", addr, res.Tests, res.Passed, res.Skipped, res.Failed)
	return res
}

// RunBinary runs the h2spec binary bin against addr and reads its
// JUnit report. A failing case is not an error; the Result lists it.
func RunBinary(ctx context.Context, bin, addr string, o Options) (Result, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "h2spec")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, "report.xml")
	caseTimeout := o.CaseTimeout
	if caseTimeout <= 0 {
		caseTimeout = 2 * time.Second
	}
	args := append([]string(nil), o.Specs...)
	args = append(args, "-h", host, "-p", port, "-o", fmt.Sprint(max(1, int(caseTimeout/time.Second))), "-j", report)
	if o.Path != "" {
		args = append(args, "-P", o.Path)
	}
	if o.TLS {
		args = append(args, "-t", "-k")
	}
	if o.Strict {
		args = append(args, "-S")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	out, runErr := cmd.CombinedOutput()
	res := Result{Output: string(out)}
	data, err := os.ReadFile(report)
	if err != nil {
		if runErr != nil {
			return res, fmt.Errorf("h2spec did not run: %v", runErr)
		}
		return res, fmt.Errorf("reading the JUnit report: %v", err)
	}
	if err := res.parse(data); err != nil {
		return res, err
	}
	if runErr != nil && res.Failed == 0 {
		return res, fmt.Errorf("h2spec failed without a failing case: %v", runErr)
	}
	return res, nil
}

// junitReport is the part of h2spec's JUnit XML that matters here.
type junitReport struct {
	Suites []struct {
		Package string `xml:"package,attr"`
		Name    string `xml:"name,attr"`
		Cases   []struct {
			Name    string    `xml:"classname,attr"`
			Failure *struct{} `xml:"failure"`
			Error   *struct{} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
			Detail  string    `xml:",innerxml"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func (r *Result) parse(data []byte) error {
	var rep junitReport
	if err := xml.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("parsing the JUnit report: %v", err)
	}
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			r.Tests++
			switch {
			case c.Failure != nil || c.Error != nil:
				r.Failed++
				r.Failures = append(r.Failures, fmt.Sprintf("%s %s: %s\n%s", s.Package, s.Name, c.Name, strings.TrimSpace(c.Detail)))
			case c.Skipped != nil:
				r.Skipped++
			default:
				r.Passed++
			}
		}
	}
	return nil
}

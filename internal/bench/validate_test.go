package bench

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
)

// Every scenario's Helios config, rendered as a run renders it, passes the
// real `helios validate` before the run starts: a scenario skipped because
// Helios rejects the config the bench wrote is the bench's bug (a new
// validation rule, such as the access log's directory having to exist, must
// not silently drop scenarios from the report).
func TestHeliosAcceptsEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the helios binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build helios with")
	}
	bin := filepath.Join(t.TempDir(), "helios")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/helios-lb/helios/cmd/helios").CombinedOutput(); err != nil {
		t.Fatalf("building helios: %v\n%s", err, out)
	}
	all, err := LoadScenarios()
	if err != nil {
		t.Fatal(err)
	}
	sels, err := Select(all, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Log: io.Discard}
	opt.defaults()
	r := &runner{opt: opt, sels: sels, heliosBin: bin, tmp: t.TempDir(),
		res: &Results{Profile: Profile{CPUs: 1}, Configs: map[string]string{}}}
	if err := r.writeFiles(); err != nil {
		t.Fatal(err)
	}
	r.validateHelios(context.Background())
	for _, sr := range r.res.Scenarios {
		if sr.Skipped != "" {
			t.Errorf("%s: %s", sr.Name, sr.Skipped)
		}
	}
	if len(r.res.Scenarios) != len(sels) {
		t.Errorf("validated %d scenarios, selected %d", len(r.res.Scenarios), len(sels))
	}
}

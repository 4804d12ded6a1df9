package bench

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	benchfiles "github.com/helios-lb/helios/bench"
)

// TestZipfScript runs bench/scripts/zipf.lua under a Lua interpreter
// (LuaJIT, which wrk embeds, or another; skipped when there is none) with
// a stand-in for wrk's API: every request carries X-User and the headers
// of the command line, and the users' shares over 200,000 requests follow
// the Zipf distribution (the hottest two within 5% of theirs, 1,000
// users seen in all).
func TestZipfScript(t *testing.T) {
	var lua string
	for _, name := range []string{"luajit", "lua5.1", "lua", "lua5.4"} {
		if p, err := exec.LookPath(name); err == nil {
			lua = p
			break
		}
	}
	if lua == "" {
		t.Skip("no Lua interpreter installed")
	}
	src, err := benchfiles.Files.ReadFile("scripts/zipf.lua")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "zipf.lua")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	const users, s, n = 1000, 1.1, 200000
	harness := `
wrk = {headers = {Host = "example.test", ["X-Trace"] = "1"}}
function wrk.format(method, path, headers, body)
  return (headers["X-User"] or "none") .. " " .. (headers["Host"] or "") .. " " .. (headers["X-Trace"] or "")
end
dofile(arg[1])
setup({set = function(self, k, v) _G[k] = v end})
init({"` + strconv.Itoa(users) + `", "` + strconv.FormatFloat(s, 'f', -1, 64) + `", "X-User"})
local counts = {}
for i = 1, ` + strconv.Itoa(n) + ` do
  local r = request()
  counts[r] = (counts[r] or 0) + 1
end
for r, c in pairs(counts) do print(r .. " " .. c) end
`
	h := filepath.Join(dir, "harness.lua")
	if err := os.WriteFile(h, []byte(harness), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lua, h, script)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", lua, err, out)
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[1] != "example.test" || f[2] != "1" {
			t.Fatalf("request %q: want X-User, the Host and the command line's header", sc.Text())
		}
		c, _ := strconv.Atoi(f[3])
		counts[f[0]] = c
	}
	var norm float64
	for k := 1; k <= users; k++ {
		norm += 1 / math.Pow(float64(k), s)
	}
	for k := 1; k <= 2; k++ {
		want := n / math.Pow(float64(k), s) / norm
		if got := float64(counts["user-"+strconv.Itoa(k)]); math.Abs(got-want) > 0.05*want {
			t.Errorf("user-%d: got %v requests of %d, want %.0f ±5%%", k, got, n, want)
		}
	}
	var names []string
	for u := range counts {
		names = append(names, u)
	}
	if len(names) != users || slices.Contains(names, "none") {
		t.Errorf("got %d users, want %d, each request with one", len(names), users)
	}
}

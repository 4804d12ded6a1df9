package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// blocking lists calls that can block a goroutine on a disk, a name
// lookup, the network or the clock: none may run on an event loop.
var blocking = map[string]bool{
	"time.Sleep": true, "os.Open": true, "os.OpenFile": true, "os.Create": true, "os.CreateTemp": true,
	"os.ReadFile": true, "os.WriteFile": true, "os.Stat": true, "os.Lstat": true, "os.Remove": true,
	"net.Dial": true, "net.DialTimeout": true, "net.Listen": true, "net.LookupHost": true, "net.LookupIP": true,
	"net.LookupPort": true, "net.LookupAddr": true, "net.ResolveTCPAddr": true, "io.ReadAll": true, "io.Copy": true,
	"unix.Fsync": true, "syscall.Fsync": true,
}

// offLoop names the functions of this package that run off the loops (on
// goroutines of their own) or may block by design, with why.
var offLoop = map[string]string{
	"lookupHost":  "name lookups run on a goroutine (lpool.resolve) and post the answer back",
	"spillLoop":   "the spill goroutine writes request bodies to disk for the loops",
	"spillAnswer": "the spill goroutine writes buffered answers to disk for the loops (respbuffer.go)",
	"run":         "only a broken poller (epoll_wait failing) makes a loop wait before trying again",
}

// TestNoBlockingCallsOnLoops enforces the first rule for code on a loop
// (DEVELOPERS.md): nothing blocks. It reads this package's code and fails
// on any call to a blocking function outside the functions known to run
// elsewhere.
func TestNoBlockingCallsOnLoops(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			checked++
			if _, ok := offLoop[fn.Name.Name]; ok {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				if callee := pkg.Name + "." + sel.Sel.Name; blocking[callee] {
					t.Errorf("%s: %s calls %s, which may block an event loop (run it on a goroutine that posts back, or list the function in offLoop with why)",
						fset.Position(call.Pos()), fn.Name.Name, callee)
				}
				return true
			})
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d functions; the package has more: is the test reading the right files?", checked)
	}
}

package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddenImport reports whether a package path gives the core I/O or
// concurrency it must not have. net/netip holds IP addresses as values
// (the API's checks of host ports parse them) and opens nothing.
func forbiddenImport(p string) bool {
	if p == "net/netip" {
		return false
	}
	for _, bad := range []string{"net", "os", "syscall", "io/fs", "sync", "unsafe", "plugin", "log", "log/slog", "math/rand", "crypto/rand"} {
		if p == bad || strings.HasPrefix(p, bad+"/") {
			return true
		}
	}
	return false
}

// TestCoreIsPure fails if the core (or the packages it imports from this
// module) does I/O, starts goroutines, or reads the wall clock: time is an
// input, as in etcd's raft.
func TestCoreIsPure(t *testing.T) {
	for _, dir := range []string{".", "../resource", "../api", "../errs"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checked++
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				if forbiddenImport(p) {
					t.Errorf("%s imports %s", f, p)
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: go statement at %s", f, fset.Position(x.Pos()))
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "time" {
						switch x.Sel.Name {
						case "Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick":
							t.Errorf("%s: time.%s at %s", f, x.Sel.Name, fset.Position(x.Pos()))
						}
					}
				}
				return true
			})
		}
		if checked == 0 {
			t.Fatalf("no source files checked in %s", dir)
		}
	}
}

// TestCoreDependenciesArePure checks the whole import graph of the core
// with `go list -deps`: nothing may reach the network or start processes,
// even indirectly. (os itself is reachable through fmt, which only formats
// here; the direct-import check above keeps the core from using it.
// net/netip, which the API's checks of host addresses use, holds IP
// addresses as values and opens nothing.)
func TestCoreDependenciesArePure(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("suspiciously few dependencies: %v", deps)
	}
	for _, d := range deps {
		if d == "net" || strings.HasPrefix(d, "net/") && d != "net/netip" || d == "os/exec" || d == "os/signal" || d == "plugin" {
			t.Errorf("the core depends on %s", d)
		}
	}
}

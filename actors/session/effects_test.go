package session

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A type switch over a family of messages or effects compiles with a case
// missing: the kind then falls through silently (a transport command the
// host never runs, a diff request the shell never sends, a message the
// session drops). Go has no exhaustive switch, so this test reads the
// package's source: every family (the types with its marker method) must
// have a case in each of its handlers.
func TestFamiliesAreHandledExhaustively(t *testing.T) {
	files := parsePackage(t)
	for _, tc := range []struct {
		family, marker string
		handlers       []string
		// kinds is a floor, so that a renamed marker cannot make the
		// family (and the check) empty
		kinds int
	}{
		{"TransportCmd", "transportCmd", []string{"runCommand"}, 6},
		{"DiffCmd", "diffCmd", []string{"sendDiff"}, 3},
		{"Op", "Fail", []string{"receiveOp"}, 8},
		{"transportNote", "transportNote", []string{"receiveTransport"}, 4},
		{"diffNote", "diffNote", []string{"receiveDiff"}, 3},
		{"persistNote", "persistNote", []string{"receivePersist"}, 3},
		{"releaseNote", "releaseNote", []string{"receiveRelease"}, 4},
	} {
		members := typesWithMethod(files, tc.marker)
		require.GreaterOrEqual(t, len(members), tc.kinds, "%s: its kinds (types with method %s)", tc.family, tc.marker)
		for _, h := range tc.handlers {
			cases := switchCases(t, files, h)
			for _, m := range members {
				assert.Contains(t, cases, m, "%s does not handle %s %s", h, tc.family, m)
			}
		}
	}
}

// The dispatch reaches every family: Receive has a case for each family's
// interface.
func TestReceiveDispatchesEveryFamily(t *testing.T) {
	cases := switchCases(t, parsePackage(t), "Receive")
	for _, f := range []string{"actor.Started", "actor.Stopped", "Op", "transportNote", "diffNote", "persistNote", "releaseNote"} {
		assert.Contains(t, cases, f)
	}
}

func parsePackage(t *testing.T) []*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	return files
}

// typesWithMethod lists the types declaring a method named name.
func typesWithMethod(files []*ast.File, name string) []string {
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != name {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				out = append(out, id.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// switchCases lists the types named in the cases of the type switches in
// function (or method) fn.
func switchCases(t *testing.T, files []*ast.File, fn string) []string {
	t.Helper()
	var out []string
	found := false
	for _, f := range files {
		for _, d := range f.Decls {
			decl, ok := d.(*ast.FuncDecl)
			if !ok || decl.Name.Name != fn || decl.Body == nil {
				continue
			}
			found = true
			ast.Inspect(decl.Body, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSwitchStmt); ok {
					for _, s := range ts.Body.List {
						for _, e := range s.(*ast.CaseClause).List {
							out = append(out, typeName(e))
						}
					}
				}
				return true
			})
		}
	}
	require.True(t, found, "no function %s", fn)
	return out
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return typeName(x.X) + "." + x.Sel.Name
	}
	return ""
}

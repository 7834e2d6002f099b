package main

// Module hygiene (DESIGN "Layout"; STYLE items 4 and 12), held with `go list`
// from here because cmd sits at the top of the dependency graph:
//
//   - messages imports nothing of ours;
//   - imports go one way: messages <- transports, learning, config <-
//     actors <- cmd, bench; the top level is fixed;
//   - every package has exactly one package doc comment.
//
// The rules are pure functions (importViolations, docViolations) tested on
// made-up inputs too, so each rule is shown to fail when it should.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/codesession/codesession"

// tiers is the fixed top level and each tree's place in the dependency
// order: a package may import the module's packages in its own tree, in a
// lower tier, or (above tier 0) in a peer tree of its own tier.
var tiers = map[string]int{
	"messages":   0,
	"transports": 1,
	"learning":   1,
	"config":     1,
	"actors":     2,
	"cmd":        3,
	"bench":      3,
}

// listedPackage is the part of `go list -json` these checks read.
type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
	Standard   bool
	Error      *struct{ Err string }
}

// goList runs `go list -e -json args...` at the module root.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v: %s", args, stderr.String())
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs, "go list %v listed nothing", args)
	return pkgs
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	gomod := strings.TrimSpace(string(out))
	require.NotEmpty(t, gomod, "not inside a module")
	return filepath.Dir(gomod)
}

// tree returns the top-level directory of a module package ("" for the
// module root) and whether path is in the module at all.
func tree(path string) (string, bool) {
	if path == modulePath {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, modulePath+"/")
	if !ok {
		return "", false
	}
	top, _, _ := strings.Cut(rest, "/")
	return top, true
}

// importViolations checks one package's direct imports against the tiers.
func importViolations(pkg string, imports []string) []string {
	from, ok := tree(pkg)
	if !ok {
		return nil
	}
	ft, known := tiers[from]
	if !known {
		return []string{fmt.Sprintf("%s: top-level directory %q is not in the fixed layout (DESIGN \"Layout\")", pkg, from)}
	}
	var out []string
	for _, imp := range imports {
		to, ours := tree(imp)
		if !ours || to == from {
			continue
		}
		tt, known := tiers[to]
		switch {
		case !known:
			out = append(out, fmt.Sprintf("%s imports %s, outside the fixed layout", pkg, imp))
		case ft == 0:
			out = append(out, fmt.Sprintf("%s imports %s: messages imports nothing of ours", pkg, imp))
		case tt > ft:
			out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): imports go messages <- transports, learning, config <- actors <- cmd, bench", pkg, from, imp, to))
		}
	}
	return out
}

// messagesDepViolations lists the module packages outside messages/ that
// the messages tree depends on, directly or not.
func messagesDepViolations(deps []string) []string {
	var out []string
	for _, d := range deps {
		if top, ours := tree(d); ours && top != "messages" {
			out = append(out, d)
		}
	}
	return out
}

// fileDoc is one non-test file's package clause and doc comment.
type fileDoc struct {
	file string
	pkg  string
	doc  string // "" when the package clause has no doc comment
}

func readDocs(t *testing.T, dir string, files []string) []fileDoc {
	t.Helper()
	fset := token.NewFileSet()
	var out []fileDoc
	for _, f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
		require.NoError(t, err)
		d := fileDoc{file: f, pkg: af.Name.Name}
		if af.Doc != nil {
			d.doc = af.Doc.Text()
		}
		out = append(out, d)
	}
	return out
}

// docViolations checks that a package has exactly one doc comment, and that
// it starts "Package <name> " (for a command: "Command " or "codesession").
func docViolations(pkg, name string, files []fileDoc) []string {
	var withDoc []fileDoc
	for _, f := range files {
		if f.doc != "" {
			withDoc = append(withDoc, f)
		}
	}
	switch len(withDoc) {
	case 0:
		return []string{fmt.Sprintf("%s has no package doc comment (add a doc.go: what it owns, concurrency, testing)", pkg)}
	case 1:
	default:
		var names []string
		for _, f := range withDoc {
			names = append(names, f.file)
		}
		return []string{fmt.Sprintf("%s has %d package doc comments, want one: %s", pkg, len(withDoc), strings.Join(names, ", "))}
	}
	doc := withDoc[0].doc
	if name == "main" {
		if !strings.HasPrefix(doc, "Command ") && !strings.HasPrefix(doc, "codesession") {
			return []string{fmt.Sprintf("%s: a command's doc starts \"Command <name>\" or \"codesession\", got %q", pkg, firstLine(doc))}
		}
		return nil
	}
	if !strings.HasPrefix(doc, "Package "+name+" ") && !strings.HasPrefix(doc, "Package "+name+"\n") {
		return []string{fmt.Sprintf("%s: the doc in %s starts %q, want \"Package %s ...\"", pkg, withDoc[0].file, firstLine(doc), name)}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func listErrors(pkgs []listedPackage) []string {
	var out []string
	for _, p := range pkgs {
		if p.Error != nil {
			out = append(out, p.ImportPath+": "+p.Error.Err)
		}
	}
	return out
}

func TestMessagesImportsNothingOfOurs(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "./messages/...")
	require.Empty(t, listErrors(pkgs))
	for _, p := range pkgs {
		assert.Empty(t, messagesDepViolations(p.Deps), "%s depends on packages of this module outside messages/", p.ImportPath)
	}
}

func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "./...")
	require.Empty(t, listErrors(pkgs))
	var bad []string
	for _, p := range pkgs {
		bad = append(bad, importViolations(p.ImportPath, p.Imports)...)
	}
	if len(bad) > 0 {
		t.Errorf("dependency direction (DESIGN \"Layout\"):\n%s", strings.Join(bad, "\n"))
	}
}

func TestEveryPackageHasOneDoc(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "./...")
	require.Empty(t, listErrors(pkgs))
	var bad []string
	for _, p := range pkgs {
		files := append(append([]string{}, p.GoFiles...), p.CgoFiles...)
		if len(files) == 0 {
			continue // test-only: its tests are documented by the package they test
		}
		bad = append(bad, docViolations(p.ImportPath, p.Name, readDocs(t, p.Dir, files))...)
	}
	if len(bad) > 0 {
		t.Errorf("package docs (STYLE item 12):\n%s", strings.Join(bad, "\n"))
	}
}

// The rules themselves must be able to fail.

func TestImportRulesCatchViolations(t *testing.T) {
	t.Parallel()
	m := func(s string) string { return modulePath + "/" + s }
	for _, tc := range []struct {
		pkg     string
		imports []string
		bad     bool
	}{
		{m("messages"), []string{"fmt", "github.com/vmihailenco/msgpack/v5"}, false},
		{m("messages"), []string{m("config")}, true},
		{m("messages/sub"), []string{m("messages")}, false},
		{m("transports/script"), []string{m("messages"), m("transports")}, false},
		{m("transports/script"), []string{m("actors")}, true},
		{m("learning"), []string{m("actors/session")}, true},
		{m("config"), []string{m("cmd/codesession")}, true},
		{m("actors/session"), []string{m("learning"), m("transports"), m("actors/store")}, false},
		{m("actors"), []string{m("bench")}, true},
		{m("actors"), []string{m("cmd/codesession")}, true},
		{m("cmd/codesession"), []string{m("actors"), m("config"), m("bench")}, false},
		{m("bench"), []string{m("actors"), m("transports/script")}, false},
		{m("util"), []string{m("messages")}, true},
		{m("actors"), []string{m("internal/x")}, true},
		{modulePath, nil, true},
	} {
		got := importViolations(tc.pkg, tc.imports)
		assert.Equal(t, tc.bad, len(got) > 0, "%s importing %v: %v", tc.pkg, tc.imports, got)
	}
	assert.Equal(t, []string{m("config")}, messagesDepViolations([]string{"fmt", m("messages"), m("config")}))
}

func TestDocRulesCatchViolations(t *testing.T) {
	t.Parallel()
	doc := func(file, pkg, text string) fileDoc { return fileDoc{file: file, pkg: pkg, doc: text} }
	for _, tc := range []struct {
		name  string
		pkg   string
		files []fileDoc
		bad   bool
	}{
		{"one doc", "store", []fileDoc{doc("doc.go", "store", "Package store keeps records.\n"), doc("a.go", "store", "")}, false},
		{"no doc", "store", []fileDoc{doc("a.go", "store", ""), doc("b.go", "store", "")}, true},
		{"two docs", "store", []fileDoc{doc("doc.go", "store", "Package store keeps records.\n"), doc("a.go", "store", "Package store again.\n")}, true},
		{"wrong name", "store", []fileDoc{doc("doc.go", "store", "Package stores keeps records.\n")}, true},
		{"not a package doc", "store", []fileDoc{doc("doc.go", "store", "This package keeps records.\n")}, true},
		{"command", "main", []fileDoc{doc("main.go", "main", "Command codesession is the CLI.\n")}, false},
		{"command by name", "main", []fileDoc{doc("main.go", "main", "codesession-bench drives sessions.\n")}, false},
		{"command without the convention", "main", []fileDoc{doc("main.go", "main", "This is the CLI.\n")}, true},
	} {
		got := docViolations("example/"+tc.pkg, tc.pkg, tc.files)
		assert.Equal(t, tc.bad, len(got) > 0, "%s: %v", tc.name, got)
	}
}

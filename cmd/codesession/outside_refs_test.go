package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideRef matches a path to the team's working files outside the
// repository: a reader of the repository cannot follow it.
var outsideRef = regexp.MustCompile(`\.\./shared|shared/reference|/work/shared|\bseeds/|(^|[\s(\x60])reference/|cli-protocols\.md|hollywood\.md|peers\.md`)

// TestNoCommentNamesAFileOutsideTheRepository (issue 14, problem 10):
// Go comments and the repository's Markdown never point at files a reader
// of the repository does not have.
func TestNoCommentNamesAFileOutsideTheRepository(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if (ext != ".go" && ext != ".md") || strings.HasSuffix(path, "outside_refs_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if ext == ".go" {
				i := strings.Index(line, "//")
				if i < 0 {
					continue
				}
				line = line[i:]
			}
			if outsideRef.MatchString(line) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d names a file outside the repository: %s", rel, n, strings.TrimSpace(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOutsideRefCatchesViolations(t *testing.T) {
	for _, bad := range []string{"// see ../shared/DESIGN.md", "// (reference/hollywood.md §3)", "// seeds/000.txt", "// shared/reference/captures/"} {
		if !outsideRef.MatchString(bad) {
			t.Errorf("%q is not caught", bad)
		}
	}
	for _, ok := range []string{"// the reference mock", "// see the seed's §3", "// a preference/value"} {
		if outsideRef.MatchString(ok) {
			t.Errorf("%q is caught", ok)
		}
	}
}

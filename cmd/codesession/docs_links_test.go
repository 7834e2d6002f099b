package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mdLink is an inline Markdown link or image: [text](target) or
// ![alt](target); the target ends at a space (a title) or the paren.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)[^)]*\)`)

// relativeLinks returns the relative link targets of a Markdown text, each
// without its #fragment, outside fenced code blocks.
func relativeLinks(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			out = append(out, target)
		}
	}
	return out
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md
// names a file of the repository (the README's reference sections moved
// to docs/, and a link left pointing at the old place would be dead).
func TestDocsLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "docs/ holds the reference pages")
	links := 0
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, path)
		for _, target := range relativeLinks(string(b)) {
			links++
			_, err := os.Stat(filepath.Join(filepath.Dir(path), filepath.FromSlash(target)))
			assert.NoError(t, err, "%s links to %s, which does not exist", rel, target)
		}
	}
	assert.Greater(t, links, 10, "the README links its docs pages")
}

// TestREADMELinksEveryDocsPage: no page in docs/ is an orphan.
func TestREADMELinksEveryDocsPage(t *testing.T) {
	root := moduleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	linked := map[string]bool{}
	for _, target := range relativeLinks(string(b)) {
		linked[filepath.Clean(target)] = true
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, path := range docs {
		rel, _ := filepath.Rel(root, path)
		assert.True(t, linked[rel], "README.md does not link %s", rel)
	}
}

// TestREADMENamesEveryCommand: the README's list of commands names each
// one the CLI has.
func TestREADMENamesEveryCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	require.NoError(t, err)
	_, list, ok := strings.Cut(string(b), "The commands, each with `--help`:")
	require.True(t, ok, "README.md has the list of commands")
	list, _, _ = strings.Cut(strings.TrimPrefix(strings.TrimSpace(list), "```"), "```")
	named := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		cmds, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "codesession "), "  ")
		for _, w := range strings.Split(cmds, "|") {
			if f := strings.Fields(w); len(f) > 0 {
				named[f[0]] = true
			}
		}
	}
	for _, c := range commands() {
		assert.True(t, named[c.name], "README.md's list of commands leaves out %q", c.name)
	}
}

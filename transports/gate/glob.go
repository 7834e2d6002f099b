package gate

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// MatchGlob reports whether the slash-separated relative path name matches
// the slash-separated pattern. Each pattern part is a path.Match pattern,
// "**" matches any number of whole parts (zero included), and {a,b}
// alternatives are expanded first.
func MatchGlob(pattern, name string) bool {
	for _, p := range expandBraces(pattern) {
		if matchParts(strings.Split(p, "/"), strings.Split(name, "/")) {
			return true
		}
	}
	return false
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		ok, err := path.Match(pat[0], name[0])
		if err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// maxBraceExpansions bounds what one pattern expands to.
const maxBraceExpansions = 256

// expandBraces expands the first {a,b,...} group of p (recursively for the
// rest); an unbalanced brace is kept literally.
func expandBraces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth, close := 0, -1
	var commas []int
	for i := open; i < len(p) && close < 0; i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				close = i
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	if close < 0 {
		return []string{p}
	}
	var alts []string
	start := open + 1
	for _, c := range append(commas, close) {
		alts = append(alts, p[start:c])
		start = c + 1
	}
	var out []string
	for _, a := range alts {
		for _, e := range expandBraces(p[:open] + a + p[close+1:]) {
			if len(out) >= maxBraceExpansions {
				return out
			}
			out = append(out, e)
		}
	}
	return out
}

// Glob expands pattern inside the workspace: the real paths of the
// matching files and directories (sorted), how many matches the gate left
// out (they resolve outside the workspace or through a dangling symlink),
// and whether the walk passed maxEntries. The pattern's literal base must pass
// the gate; every match is checked again.
func Glob(ctx context.Context, ws Workspace, pattern string, maxEntries int) (matches []string, leftOut int, capped bool, err error) {
	seen := map[string]bool{}
	for _, p := range expandBraces(pattern) {
		base, rest, err := ws.GlobBase(p)
		if err != nil {
			return nil, 0, false, err
		}
		baseReal, err := ws.Resolve(base)
		if err != nil {
			return nil, 0, false, &Refusal{Path: pattern, Reason: "its directory " + strings.TrimPrefix(err.Error(), "refused: ")}
		}
		fi, err := os.Stat(baseReal)
		if err != nil || !fi.IsDir() {
			continue // nothing to match under a missing directory
		}
		walked := 0
		werr := filepath.WalkDir(baseReal, func(path string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil || path == baseReal {
				return nil
			}
			walked++
			if walked > maxEntries {
				capped = true
				return fs.SkipAll
			}
			if d.IsDir() && d.Name() == ".git" && !strings.HasPrefix(rest, ".git") {
				return filepath.SkipDir
			}
			rel, rerr := filepath.Rel(baseReal, path)
			if rerr != nil || !MatchGlob(rest, filepath.ToSlash(rel)) {
				return nil
			}
			if _, gerr := ws.Resolve(path); gerr != nil {
				leftOut++
				return nil
			}
			if !seen[path] {
				seen[path] = true
				matches = append(matches, path)
			}
			return nil
		})
		if werr != nil && !errors.Is(werr, fs.SkipAll) {
			return nil, 0, false, werr
		}
	}
	sort.Strings(matches)
	return matches, leftOut, capped, nil
}

package gate

// The tool gate (seed 002, "The gate"): every path argument of a file tool
// must resolve inside the workspace after symlinks, read from both the
// workspace as given and its real path; a path that reaches a dangling
// symlink at any depth is refused even when the link points inside; glob
// patterns are checked the same way. The gate hands back the one real path
// the tool then opens, so what was checked is what is opened.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// maxLinkHops bounds the symlinks followed while resolving one path, as the
// kernel's ELOOP does.
const maxLinkHops = 40

// Workspace is a session's working directory: the path as given (absolute
// and clean) and its real path (no symlinks). Build it with NewWorkspace.
type Workspace struct {
	given string
	real  string
}

// NewWorkspace resolves dir. It fails when dir does not exist, cannot be
// resolved or is not a directory.
func NewWorkspace(dir string) (Workspace, error) {
	if dir == "" {
		return Workspace{}, errors.New("the session has no working directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Workspace{}, fmt.Errorf("cannot make %q absolute: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Workspace{}, fmt.Errorf("working directory %q cannot be resolved: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return Workspace{}, fmt.Errorf("working directory %q is not a directory", dir)
	}
	return Workspace{given: abs, real: real}, nil
}

// Given is the workspace as given, absolute and clean.
func (w Workspace) Given() string { return w.given }

// Real is the workspace's real path.
func (w Workspace) Real() string { return w.real }

// Refusal is the gate's refusal of a path. Its text goes back to the model
// as the tool result.
type Refusal struct {
	Path   string // the path argument as the model gave it
	Reason string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("refused: %s: %s", quoteArg(r.Path), r.Reason)
}

// Reasons a path is refused; tests match them.
const (
	ReasonEscapes  = "it resolves outside the workspace"
	ReasonDangling = "it goes through a dangling symlink"
	ReasonDiffers  = "it names different files read from the workspace as given and from its real path"
	ReasonEmpty    = "the path is empty"
	ReasonNUL      = "the path contains a NUL byte"
	ReasonLoop     = "too many levels of symbolic links"
)

func quoteArg(p string) string {
	if len(p) > 200 {
		p = p[:200] + "..."
	}
	return fmt.Sprintf("%q", p)
}

// Resolve checks the path argument p and returns the real path it names,
// which is inside the workspace (possibly the workspace itself) and may not
// exist yet. A relative p is read against both the workspace as given and
// its real path; each reading is resolved twice, once with ".." taken
// lexically (as a tool that cleans the path would) and once as the kernel
// takes it (".." after a symlink climbs the link target's parent). Every
// reading must resolve inside the workspace without crossing a dangling
// symlink, and all must name the same file: a path that only climbs out of
// the workspace and back in is refused. Any other failure to resolve a
// component (permissions, a file used as a directory) is a refusal too.
func (w Workspace) Resolve(p string) (string, error) {
	if p == "" {
		return "", &Refusal{Path: p, Reason: ReasonEmpty}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", &Refusal{Path: p, Reason: ReasonNUL}
	}
	if w.real == "" {
		return "", &Refusal{Path: p, Reason: "the session has no working directory"}
	}
	var raws []string
	if filepath.IsAbs(p) {
		raws = []string{p}
	} else {
		raws = []string{w.given + string(filepath.Separator) + p, w.real + string(filepath.Separator) + p}
	}
	got := ""
	var walked [4]string // the readings walked so far: the same string resolves the same way
	n := 0
	for _, raw := range raws {
		for j, cand := range []string{filepath.Clean(raw), raw} {
			if slices.Contains(walked[:n], cand) {
				continue
			}
			if j == 1 && !hasDotDot(cand) {
				// physical skips "" and "." components and looks past a
				// component only for others, so without ".." the reading
				// as given resolves as its clean one just did
				continue
			}
			walked[n], n = cand, n+1
			r, err := physical(cand)
			if err != nil {
				return "", &Refusal{Path: p, Reason: err.Error()}
			}
			if !inside(w.real, r) {
				return "", &Refusal{Path: p, Reason: ReasonEscapes}
			}
			if got != "" && r != got {
				return "", &Refusal{Path: p, Reason: ReasonDiffers}
			}
			got = r
		}
	}
	return got, nil
}

// physical resolves the absolute path abs component by component as the
// kernel would: a symlink is replaced by its fully resolved target, ".."
// climbs the resolved parent. A component that does not exist ends the walk
// and the rest is appended lexically (".." in it is cleaned). A symlink
// whose target does not fully resolve is dangling, and refused.
func physical(abs string) (string, error) {
	if !filepath.IsAbs(abs) {
		return "", fmt.Errorf("not an absolute path")
	}
	rest := splitPath(abs)
	cur := string(filepath.Separator)
	hops := 0
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur has no symlinks: lexical is physical
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			// The rest does not exist yet (a file to create).
			joined := filepath.Clean(filepath.Join(append([]string{next}, rest[i+1:]...)...))
			for _, r := range rest[i+1:] {
				if r == ".." {
					// ".." climbed back out of the missing part into what
					// exists, which may hold symlinks: resolve the clean
					// path (it has no "..", so this recurses once).
					return physical(joined)
				}
			}
			return joined, nil
		}
		if err != nil {
			return "", componentErr(next, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if i+1 < len(rest) && !fi.IsDir() && hasMore(rest[i+1:]) {
				return "", fmt.Errorf("%s is not a directory", next)
			}
			cur = next
			continue
		}
		hops++
		if hops > maxLinkHops {
			return "", errors.New(ReasonLoop)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", componentErr(next, err)
		}
		if !filepath.IsAbs(target) {
			target = cur + string(filepath.Separator) + target
		}
		// The target must resolve completely: a link to nowhere is dangling,
		// at whatever depth it sits, even when it points inside.
		resolved, err := filepath.EvalSymlinks(target)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", errors.New(ReasonDangling)
			}
			if errors.Is(err, syscall.ELOOP) || strings.Contains(err.Error(), "too many links") {
				return "", errors.New(ReasonLoop)
			}
			return "", componentErr(next, err)
		}
		cur = resolved
	}
	return cur, nil
}

// hasDotDot reports whether the path p has a ".." component.
func hasDotDot(p string) bool {
	return slices.Contains(splitPath(p), "..")
}

// hasMore reports whether parts holds a component other than "" and ".".
func hasMore(parts []string) bool {
	for _, p := range parts {
		if p != "" && p != "." {
			return true
		}
	}
	return false
}

func splitPath(p string) []string {
	return strings.Split(p, string(filepath.Separator))
}

func componentErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot resolve %s: %v", path, err)
}

// inside reports whether p is base or below it; both are clean and absolute.
func inside(base, p string) bool {
	rel, err := filepath.Rel(base, p)
	if err != nil {
		return false
	}
	return rel == "." || filepath.IsLocal(rel)
}

// Rel is the real path r (inside the workspace) relative to the workspace,
// with forward slashes; "." for the workspace itself.
func (w Workspace) Rel(r string) string {
	rel, err := filepath.Rel(w.real, r)
	if err != nil {
		return r
	}
	return filepath.ToSlash(rel)
}

// hasMeta reports whether s holds a glob metacharacter.
func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[{\`) }

// GlobBase splits a glob pattern into its literal directory prefix (which
// the gate resolves like any path) and the pattern below it, with forward
// slashes. A pattern is refused when a ".." appears after its literal
// prefix: it could climb out of whatever directory matched.
func (w Workspace) GlobBase(pattern string) (base string, rest string, err error) {
	if pattern == "" {
		return "", "", &Refusal{Path: pattern, Reason: "the pattern is empty"}
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return "", "", &Refusal{Path: pattern, Reason: ReasonNUL}
	}
	parts := strings.Split(filepath.ToSlash(pattern), "/")
	lit := 0
	for lit < len(parts) && !hasMeta(parts[lit]) {
		lit++
	}
	if lit == len(parts) {
		// No metacharacter: the pattern is a path; its last part is the
		// pattern matched in its parent.
		lit = len(parts) - 1
	}
	for _, p := range parts[lit:] {
		if p == ".." {
			return "", "", &Refusal{Path: pattern, Reason: "a glob pattern may not use \"..\" after its first wildcard"}
		}
	}
	base = strings.Join(parts[:lit], "/")
	switch {
	case base == "" && strings.HasPrefix(pattern, "/"):
		base = "/"
	case base == "":
		base = "."
	}
	return filepath.FromSlash(base), strings.Join(parts[lit:], "/"), nil
}

// OpenFile opens real, a path Resolve returned, through an os.Root at the
// workspace's real path: every component is resolved again by the open
// itself, and one that leads out of the workspace (a directory swapped for
// a link out between the check and the open) fails it. The last component
// is not followed when it is a symlink either.
func (w Workspace) OpenFile(real string, flag int, perm fs.FileMode) (*os.File, error) {
	rel, err := filepath.Rel(w.real, real)
	if err != nil || !inside(w.real, real) {
		return nil, &Refusal{Path: real, Reason: ReasonEscapes}
	}
	root, err := os.OpenRoot(w.real)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, flag|syscall.O_NOFOLLOW, perm)
	if err != nil && (errors.Is(err, syscall.ELOOP) || strings.Contains(err.Error(), "escapes")) {
		return nil, &Refusal{Path: real, Reason: "it changed after the gate checked it: " + pathErrText(err)}
	}
	return f, err
}

func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

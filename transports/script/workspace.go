package script

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/codesession/codesession/messages"
)

// Refusal texts of the file steps; tests and scenario authors match them.
const (
	refusedEscape  = "refused: path escapes the workspace"
	refusedNoCwd   = "refused: the session has no working directory"
	refusedRoot    = "refused: path is the workspace itself"
	refusedPlan    = "refused in plan posture"
	refusedNotTool = "refused: tool %q is not in this session's allowed tools"
)

// workspace is a session's working directory: the path as given (made
// absolute) and its real path. The zero value has no directory, and every
// file step is refused.
type workspace struct {
	given string
	real  string
}

func newWorkspace(cwd string) (workspace, error) {
	if cwd == "" {
		return workspace{}, nil
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return workspace{}, messages.FieldError(messages.OpStart, "cwd", "cannot make %q absolute", cwd)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return workspace{}, &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart, Field: "cwd",
			Message: fmt.Sprintf("working directory %q does not exist or cannot be resolved", cwd), Err: err}
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return workspace{}, messages.FieldError(messages.OpStart, "cwd", "working directory %q is not a directory", cwd)
	}
	return workspace{given: abs, real: real}, nil
}

// display is the absolute path an agent would name in a tool input: p
// against the working directory as given.
func (w workspace) display(p string) string {
	if filepath.IsAbs(p) || w.given == "" {
		return p
	}
	return filepath.Join(w.given, p)
}

// refusal is a file step's failure that is reported to the agent as an
// isError tool result; its text is the whole output.
type refusal string

func (r refusal) Error() string { return string(r) }

// lexical maps p to an absolute path under the real working directory, or
// refuses it. A relative p must stay local (filepath.IsLocal), so it is
// inside whether read against the path as given or the real one; an
// absolute p must be inside either of them.
func (w workspace) lexical(p string) (string, error) {
	if w.real == "" {
		return "", refusal(refusedNoCwd)
	}
	if !filepath.IsAbs(p) {
		if !filepath.IsLocal(p) {
			return "", refusal(refusedEscape)
		}
		return filepath.Join(w.real, p), nil
	}
	p = filepath.Clean(p)
	for _, base := range []string{w.given, w.real} {
		if rel, ok := within(base, p); ok {
			return filepath.Join(w.real, rel), nil
		}
	}
	return "", refusal(refusedEscape)
}

// resolve maps p to the real path it names, refusing one that leaves the
// workspace through "..", an absolute path or a symlink, or that goes
// through a dangling symlink (a write through it would create the target
// wherever it points).
func (w workspace) resolve(p string) (string, error) {
	abs, err := w.lexical(p)
	if err != nil {
		return "", err
	}
	real, err := realPath(abs)
	if err != nil {
		return "", err
	}
	if _, ok := within(w.real, real); !ok {
		return "", refusal(refusedEscape)
	}
	return real, nil
}

// realPath resolves the symlinks of abs's longest existing prefix and
// appends the rest, which does not exist yet.
func realPath(abs string) (string, error) {
	cur, rest := abs, []string(nil)
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if len(rest) > 0 {
				if _, lerr := os.Lstat(filepath.Join(r, rest[0])); lerr == nil {
					// It exists, yet resolving it failed: a dangling symlink.
					return "", refusal(refusedEscape + " (through a dangling symlink)")
				}
			}
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", refusal(fmt.Sprintf("cannot resolve %s: %v", abs, unwrapPath(err)))
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", refusal(fmt.Sprintf("cannot resolve %s", abs))
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// within returns p relative to base when p is base or below it.
func within(base, p string) (string, bool) {
	rel, err := filepath.Rel(base, p)
	if err != nil {
		return "", false
	}
	if rel == "." || filepath.IsLocal(rel) {
		return rel, true
	}
	return "", false
}

// write writes content to p, creating parent directories; the output is
// what Claude Code's Write tool answers.
func (w workspace) write(p, content string) (string, error) {
	real, err := w.resolve(p)
	if err != nil {
		return "", err
	}
	if real == w.real {
		return "", refusal(refusedRoot)
	}
	existed := false
	if fi, err := os.Stat(real); err == nil {
		if fi.IsDir() {
			return "", refusal(fmt.Sprintf("write failed: %s is a directory", w.display(p)))
		}
		existed = true
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return "", refusal(fmt.Sprintf("write failed: %v", unwrapPath(err)))
	}
	if err := os.WriteFile(real, []byte(content), 0o644); err != nil {
		return "", refusal(fmt.Sprintf("write failed: %v", unwrapPath(err)))
	}
	if existed {
		return fmt.Sprintf("The file %s has been updated.", w.display(p)), nil
	}
	return fmt.Sprintf("File created successfully at: %s", w.display(p)), nil
}

// edit replaces the one occurrence of old in p by new.
func (w workspace) edit(p, old, new string) (string, error) {
	real, err := w.resolve(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", refusal(fmt.Sprintf("edit failed: %s does not exist", w.display(p)))
	case err != nil:
		return "", refusal(fmt.Sprintf("edit failed: %v", unwrapPath(err)))
	case fi.IsDir():
		return "", refusal(fmt.Sprintf("edit failed: %s is a directory", w.display(p)))
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return "", refusal(fmt.Sprintf("edit failed: %v", unwrapPath(err)))
	}
	switch n := strings.Count(string(data), old); n {
	case 1:
	case 0:
		return "", refusal(fmt.Sprintf("edit failed: the old string was not found in %s", w.display(p)))
	default:
		return "", refusal(fmt.Sprintf("edit failed: the old string occurs %d times in %s; it must occur exactly once", n, w.display(p)))
	}
	// WriteFile keeps an existing file's mode.
	if err := os.WriteFile(real, []byte(strings.Replace(string(data), old, new, 1)), fi.Mode().Perm()); err != nil {
		return "", refusal(fmt.Sprintf("edit failed: %v", unwrapPath(err)))
	}
	return fmt.Sprintf("The file %s has been edited.", w.display(p)), nil
}

// remove deletes the file (or symlink) at p; like rm, a symlink itself is
// removed, not its target, and a directory is refused.
func (w workspace) remove(p string) (string, error) {
	abs, err := w.lexical(p)
	if err != nil {
		return "", err
	}
	if abs == w.real {
		return "", refusal(refusedRoot)
	}
	dir, err := w.resolve(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	target := filepath.Join(dir, filepath.Base(abs))
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", refusal(fmt.Sprintf("rm: cannot remove '%s': No such file or directory", w.display(p)))
	case err != nil:
		return "", refusal(fmt.Sprintf("rm: cannot remove '%s': %v", w.display(p), unwrapPath(err)))
	case fi.IsDir():
		return "", refusal(fmt.Sprintf("rm: cannot remove '%s': Is a directory", w.display(p)))
	}
	if err := os.Remove(target); err != nil {
		return "", refusal(fmt.Sprintf("rm: cannot remove '%s': %v", w.display(p), unwrapPath(err)))
	}
	return fmt.Sprintf("removed '%s'", w.display(p)), nil
}

// unwrapPath drops a *fs.PathError's path, which the caller already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

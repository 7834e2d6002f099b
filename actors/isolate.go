package actors

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/codesession/codesession/actors/session"
	"github.com/codesession/codesession/messages"
)

// WorktreesDir is where isolated sessions' worktrees live, under the home.
const WorktreesDir = "worktrees"

// worktreeIDHex is how many hex digits of the session id name its branch
// and worktree: 48 bits, unique among any one home's sessions in practice,
// and short enough to type.
const worktreeIDHex = 12

// isolation is what a start prepared before the registry saw it.
type isolation struct {
	sessionID string
	worktree  *messages.Worktree
	warnings  []string
}

// undo removes what prepareStart made, for a start that was refused.
func (iso isolation) undo() {
	if iso.worktree != nil {
		_ = RemoveWorktree(context.Background(), iso.worktree)
		_ = exec.Command("git", "-C", iso.worktree.Repo, "branch", "-D", iso.worktree.Branch).Run()
	}
}

// prepareStart isolates a start (op.Isolate, else the config's default):
// with worktree, the session gets its id now, a git worktree on branch
// codesession/<short id> under <home>/worktrees, and op.Cwd moves into
// it. Without isolation, other live sessions working in the same
// directory make a warning, or a conflict when op.Exclusive. An explicit
// worktree outside a git repository is invalid; the config's default
// there falls back to no isolation, with a warning.
func (r *Runtime) prepareStart(ctx context.Context, op *messages.Start) (isolation, error) {
	var iso isolation
	if cmp.Or(op.Isolate, r.cfg.Isolate) == messages.IsolateWorktree {
		sid := messages.NewSessionID()
		wt, cwd, err := addWorktree(ctx, r.cfg.Home, op.Cwd, sid)
		switch {
		case err == nil:
			op.Cwd = cwd
			return isolation{sessionID: sid, worktree: wt}, nil
		case op.Isolate == messages.IsolateWorktree:
			return iso, err
		}
		iso.warnings = append(iso.warnings, "not isolated: "+messages.AsError(messages.OpStart, err).Message)
	}
	others, err := r.liveInDir(ctx, op.Cwd)
	if err != nil {
		r.log.Warn("start: cannot list the live sessions to check the directory", "err", err)
		return iso, nil
	}
	if len(others) > 0 {
		msg := fmt.Sprintf("%d other live session(s) work in %s: their changes and turn diffs will mix", len(others), op.Cwd)
		if op.Exclusive {
			return iso, messages.Errorf(messages.CodeConflict, messages.OpStart, "%s; stop them, or isolate this one (isolate worktree)", msg)
		}
		iso.warnings = append(iso.warnings, msg+" (isolate this one: --isolate worktree; refuse instead: --exclusive)")
	}
	return iso, nil
}

// liveInDir lists the live sessions whose working directory is dir, or
// below it, or above it. The registry answers from the working directory
// each live session was spawned with: a start costs one message, not a
// record read per live session (which made starting N sessions cost N^2/2
// record reads: about 4% of a 1,000-session bench run's CPU, 100x that at
// 10,000).
func (r *Runtime) liveInDir(ctx context.Context, dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	ch := make(chan session.Result[[]string], 1)
	r.engine.Send(r.registry, regLive{inDir: dir, reply: ch})
	return await(ctx, "live", ch)
}

// cleanCwd is a working directory as liveInDir compares it ("" stays "").
func cleanCwd(cwd string) string {
	if cwd == "" {
		return ""
	}
	return filepath.Clean(cwd)
}

// sharesDir reports whether two cleaned directories are one within the
// other; the prefix test first spares filepath.Rel for the unrelated ones
// (a cleaned path within another always starts with it).
func sharesDir(a, b string) bool {
	if !strings.HasPrefix(a, b) && !strings.HasPrefix(b, a) {
		return false
	}
	return within(a, b) || within(b, a)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// git runs git without a shell in dir and returns its trimmed stdout.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("git %s: %s", args[0], msg)
		}
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	return strings.TrimSpace(out.String()), nil
}

// addWorktree adds a worktree of cwd's repository for session sid, at the
// repository's HEAD (the user's uncommitted changes stay in their
// checkout), and returns it with the directory the session works in: the
// same place relative to the repository root as cwd.
func addWorktree(ctx context.Context, home, cwd, sid string) (*messages.Worktree, string, error) {
	const op = messages.OpStart
	invalid := func(format string, args ...any) error {
		return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "isolate", Message: fmt.Sprintf(format, args...)}
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, "", invalid("isolate worktree needs git, and git is not installed here")
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return nil, "", invalid("cwd %s: %v", cwd, err)
	}
	root, err := git(ctx, real, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, "", invalid("isolate worktree needs a git repository, and %s is not in one", cwd)
	}
	base, err := git(ctx, root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil || base == "" {
		return nil, "", invalid("isolate worktree needs a commit to branch from, and the repository at %s has none yet", root)
	}
	short := strings.TrimPrefix(sid, messages.SessionIDPrefix)[:worktreeIDHex]
	wt := &messages.Worktree{Path: filepath.Join(home, WorktreesDir, short), Branch: "codesession/" + short, Repo: root, Base: base}
	if err := os.MkdirAll(filepath.Dir(wt.Path), 0o700); err != nil {
		return nil, "", messages.Wrap(messages.CodeInternal, op, err, "cannot make the worktrees directory")
	}
	if _, err := git(ctx, root, "worktree", "add", "--quiet", "-b", wt.Branch, wt.Path, base); err != nil {
		return nil, "", messages.Wrap(messages.CodeInternal, op, err, "cannot add the session's worktree: "+err.Error())
	}
	rel, err := filepath.Rel(root, real)
	if err != nil {
		rel = "."
	}
	dir := filepath.Join(wt.Path, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil { // an untracked directory of the checkout
		return nil, "", messages.Wrap(messages.CodeInternal, op, err, "cannot make the session's directory in its worktree")
	}
	return wt, dir, nil
}

// RemoveWorktree removes a session's worktree (its files, and git's
// record of it). The branch stays: it holds the session's work until the
// user merges or deletes it.
func RemoveWorktree(ctx context.Context, wt *messages.Worktree) error {
	if wt == nil || wt.Path == "" {
		return nil
	}
	_, err := git(ctx, wt.Repo, "worktree", "remove", "--force", wt.Path)
	if err != nil {
		// the repository moved or is gone: remove the files, and let git
		// forget worktrees whose directories are missing
		if rerr := os.RemoveAll(wt.Path); rerr != nil {
			return rerr
		}
		_, _ = git(ctx, wt.Repo, "worktree", "prune")
	}
	return nil
}

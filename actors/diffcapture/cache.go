package diffcapture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// statusArgs is the one status run of a Begin and of a Finish: every path
// changed against HEAD or the index, unmerged or untracked, and HEAD
// itself (--branch; --no-ahead-behind so an upstream costs nothing).
var statusArgs = []string{"status", "--porcelain=v2", "-z", "--branch", "--no-ahead-behind", "--untracked-files=all",
	"--no-renames", "--ignore-submodules=dirty"}

// discovered is what a session keeps between turns: where the repository
// is and the overrides of its filter drivers, valid while the files it was
// read from are unchanged (stamp).
type discovered struct {
	bin   string
	env   []string
	rp    repo
	filt  []string
	stamp string
}

func (d *discovered) runner() *runner {
	return &runner{bin: d.bin, dir: d.rp.top, env: d.env, filters: d.filt}
}

// repository returns the work tree around g.cwd: the cached one while the
// repository's config files and directory are the ones it was read from
// (same inode, size, mtime and ctime), else found again (rev-parse and
// config: two git runs). A config that includes other files is read at
// every use, as is a directory that is no work tree (it may become one).
// A directory git found no repository around is asked again only once a
// .git appears in it or above it (noRepository). A reason (why) means the
// tool-event fallback applies.
func (g *Git) repository(ctx context.Context) (*discovered, string, error) {
	if d := g.cachedRepository(); d != nil {
		return d, "", nil
	}
	if g.stillNoRepository() {
		return nil, whyNoRepository, nil
	}
	r, rp, _, why, err := g.discover(ctx)
	if err != nil || why != "" {
		var none *noRepository
		if why == whyNoRepository {
			none = lookForRepository(g.cwd)
		}
		g.mu.Lock()
		g.cached, g.none = nil, none
		g.mu.Unlock()
		return nil, why, err
	}
	// the stamp is taken after the config was read: a change in between
	// makes the next use read it again, never keeps a stale override
	d := &discovered{bin: r.bin, env: r.env, rp: rp, filt: r.filters, stamp: repoStamp(rp)}
	g.mu.Lock()
	g.cached, g.none = d, nil
	g.mu.Unlock()
	return d, "", nil
}

// cachedRepository is repository's cached answer while it holds, without
// finding the work tree again (nil: find it).
func (g *Git) cachedRepository() *discovered {
	g.mu.Lock()
	d := g.cached
	g.mu.Unlock()
	if d != nil && !d.rp.includes && repoStamp(d.rp) == d.stamp {
		return d
	}
	return nil
}

// repoStamp identifies the state of what discovery read: the work tree's
// top and the common directory by identity (a repository made again is
// another inode; their times change with every file made in them), the
// config and the work tree's config.worktree by identity, size and times.
func repoStamp(rp repo) string {
	var s string
	for i, p := range []string{rp.top, rp.common, filepath.Join(rp.common, "config"), filepath.Join(rp.gitDir, "config.worktree")} {
		s += statStamp(p, i >= 2)
	}
	return s
}

// statStamp is one file's part of a stamp: its identity, and with full
// its size and times too; "-|" when it does not exist.
func statStamp(p string, full bool) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "-|"
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		return fmt.Sprintf("unstamped %p|", &p) // never equal: no cache
	}
	s := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	if full {
		s += fmt.Sprintf(":%d:%d.%d:%d.%d", st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	}
	return s + "|"
}

// changedSince lists what the work tree (through the index) changed
// against the commit or tree start, and the untracked paths: the two runs
// a Finish needs when HEAD moved during the turn.
func changedSince(ctx context.Context, r *runner, start string) ([]rawEntry, []string, error) {
	out, err := r.output(ctx, "diff-index", "--raw", "-z", "--no-renames", "--ignore-submodules=dirty", start)
	if err != nil {
		return nil, nil, err
	}
	changed, _, err := parseRaw(fields(out), 0)
	if err != nil {
		return nil, nil, err
	}
	out, err = r.output(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, nil, err
	}
	return changed, fields(out), nil
}

// headedWriter keeps what git writes up to the first empty NUL-terminated
// record (the end of -z --raw --numstat output) whole, and the patch that
// follows up to max bytes; the write that goes past fails, which ends git.
type headedWriter struct {
	head    []byte
	inPatch bool
	patch   capWriter
}

func (w *headedWriter) Write(p []byte) (int, error) {
	n := 0
	for !w.inPatch && len(p) > 0 {
		b := p[0]
		w.head = append(w.head, b)
		p, n = p[1:], n+1
		if b == 0 && len(w.head) >= 2 && w.head[len(w.head)-2] == 0 {
			w.head = w.head[:len(w.head)-1]
			w.inPatch = true
		}
	}
	if len(p) == 0 {
		return n, nil
	}
	m, err := w.patch.Write(p)
	return n + m, err
}

// headedRun runs a -z diff whose records are followed by a patch: it
// returns the records, and the patch capped at limit bytes (capped says
// the cap fired and git was ended, which is not an error).
func (r *runner) headedRun(ctx context.Context, limit int, args ...string) (head, patch []byte, capped bool, err error) {
	w := &headedWriter{patch: capWriter{max: limit}}
	if err := r.runWith(ctx, nil, w, args...); err != nil && !w.patch.hit {
		return nil, nil, false, err
	}
	return w.head, w.patch.buf.Bytes(), w.patch.hit, nil
}

// Why discovery found no work tree: no repository around the directory at
// all, or a repository's git directory (or a bare one) with no work tree.
const (
	whyNoRepository = "not a git work tree"
	whyNoWorkTree   = "not a git work tree: the directory is inside a repository's git directory"
)

// noRepository is what a session keeps of a working directory git found no
// repository around: the directory (resolved, as git sees it) and each of
// its parents up to the root, none of which had a .git. Git's discovery
// looks for a .git (a directory, or a file naming one) in each of them, so
// until one appears, or the path leads elsewhere, asking again would get
// the same answer at the cost of a git process on the turn's path, twice a
// turn. Its checks are lstat calls that find nothing: no timestamps, so no
// racy window (a .git made at any moment is seen by the next check). Only
// on a file system that keeps its stat data locally: a network file
// system may answer from a stale cache.
type noRepository struct {
	resolved string
	dirs     []string // the resolved directory first, then its parents
}

// lookForRepository is the noRepository of cwd when neither it nor any of
// its parents has a .git now, or nil (a .git somewhere above that git did
// not take: a file-system boundary, a .git git would not read; ask again
// at every use).
func lookForRepository(cwd string) *noRepository {
	resolved, err := filepath.EvalSymlinks(cwd)
	if err != nil || !filepath.IsAbs(resolved) || !localStamps(resolved) {
		return nil
	}
	n := &noRepository{resolved: resolved}
	for d := resolved; ; d = filepath.Dir(d) {
		n.dirs = append(n.dirs, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	if !n.holds(cwd) {
		return nil
	}
	return n
}

// holds says whether cwd still leads to the same directory and no .git
// has appeared in it or any of its parents.
func (n *noRepository) holds(cwd string) bool {
	if resolved, err := filepath.EvalSymlinks(cwd); err != nil || resolved != n.resolved {
		return false
	}
	var st unix.Stat_t
	for _, d := range n.dirs {
		if err := unix.Lstat(filepath.Join(d, ".git"), &st); !errors.Is(err, unix.ENOENT) {
			return false
		}
	}
	return true
}

// stillNoRepository says whether the last discovery found no repository
// around cwd and nothing has changed that.
func (g *Git) stillNoRepository() bool {
	g.mu.Lock()
	n := g.none
	g.mu.Unlock()
	return n != nil && n.holds(g.cwd)
}

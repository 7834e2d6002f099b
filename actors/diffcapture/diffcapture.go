// Package diffcapture computes what each turn of a session changed in its
// working directory (seed 000 §6). Capturer is the seam: the session's
// diff-capture actor calls Begin before a turn reaches the backend and
// Finish after it closes.
//
// Git (NewGit, GitFactory: the runtime's default) is the capture: when the
// working directory is inside a git work tree at Begin, the turn's diff is
// the work tree at Finish against the work tree at Begin. It keeps a
// snapshot of the work tree per session (scratch.go): a scratch index,
// seeded with a copy of the repository's index, holding every tracked path
// and every untracked path .gitignore does not exclude (what status -uall
// reports), with its objects in a private temporary directory (the
// repository's objects are read through the alternates; nothing is written
// into the repository). The runtime has those directories made through the
// session's process group (WithScratchDirs), which records them so that
// the next boot removes the ones a daemon that died left. `git add -A -v` brings the snapshot to the work
// tree, hashing only what its stat data says changed, and prints a line per
// path whose content changed.
//
// A witness (witness.go) proves in-process, without git, that the work
// tree is still the snapshot: the stat data the snapshot records for each
// path, and the stat data of every directory git would look into for
// untracked files (ignored directories listed by one status), all older
// than the clock reading it was made under (git's racy-clean rule), on a
// local file system. While it holds, Begin and Finish run no git at all.
//
// On the turn's path, then: Begin runs nothing while the witness holds
// (the current snapshot is the baseline), else one add (nothing printed:
// the tree of the last snapshot is the baseline, else the snapshot now,
// its tree written later); Finish runs nothing while the witness holds
// and the snapshot is still the baseline, else one add and, when it
// printed anything, one diff of the snapshot against the baseline's tree
// (diff-index --cached -M -z: raw and numstat records, then the patch, of
// which only the patch is capped). Off it, after the answer was handed
// back (Settle, which the session's differ calls while the turn starts or
// the driver reads the result): write-tree, the tree of the snapshot just
// taken, and, when no witness holds, a new one (one add; one status the
// first time and when a directory appeared). Begin and Finish write a
// tree still owed themselves, under the same lock, so a Settle that has
// not run costs time, never correctness. After a tool ran, Prepare (which
// the differ calls on tool results, one at a time) does Finish's work
// ahead, beside the rest of the turn: the witness's add and the diff, kept
// for a Finish that finds the witness still holding (a Prepare asked for
// sooner after the last than that one took is skipped, so git runs beside
// the agent at most about half of the time). While the witness holds,
// BeginNow and FinishNow (Quick) give Begin's and Finish's answer at once,
// for a caller that asks on its own goroutine before it hands the stage to
// another (a witness of up to 256 paths). A clean later turn runs no
// git process on its path (two without a witness: a file dated ahead of
// the clock, a tree of more than 20,000 directories or 100,000 entries, a
// file system other than ext4, xfs, btrfs, tmpfs, overlayfs or f2fs); one
// that changed something runs none at Finish when Prepare ran after its
// last change, else two. The session's first Begin
// also finds where the repository is and the overrides of its filter
// drivers (rev-parse, config), kept while the repository's config files
// are unchanged (cache.go). The snapshot is seeded again from the repository's
// index when that index or info/exclude changed (the agent staged or
// committed) or a .gitignore did, so paths ignored now drop out as status
// would drop them; when the index changed during the turn, Finish reads it
// for files the snapshot lacks (staged past .gitignore with add -f, which
// add -A does not pick up) and adds those with -f: one more run, only then.
// Commits made during the turn are folded in (the work
// tree is compared, not HEAD), files already dirty at Begin show only this
// turn's change, new untracked files are additions, and renames are found
// across tracked and untracked files alike.
//
// A repository whose index holds a gitlink (a submodule, an embedded
// repository) takes the status way instead, because add refreshes a
// gitlink by running git status inside it, under that repository's own
// configuration: Begin records HEAD and the paths of one `git status
// --porcelain=v2 -z --branch -uall --ignore-submodules=dirty` and hashes
// the content of every path status reported into a per-turn scratch index;
// Finish lists the paths that can differ (one status again while HEAD has
// not moved; after a mid-turn commit diff-index against the start commit
// and ls-files --others; and the paths status reported at Begin), brings a
// scratch index to their content now and diffs it in one run against the
// baseline (the start commit limited to the candidates by pathspec, or a
// tree of their baseline content): four processes on the path.
//
// The result is capped: the unified diff at DefaultMaxDiffBytes
// (Truncated, with a marker line), the file list at DefaultMaxFiles
// (FilesOmitted counts the rest); the summary covers every file. git runs
// without a shell (see run.go), with NUL-delimited output (add's lines are
// only counted, never parsed for paths), a timeout, a scrubbed environment
// (GIT_OPTIONAL_LOCKS=0: the repository's index is never locked or
// refreshed), and command-line configuration that switches off hooks,
// fsmonitor, external diff, textconv, the pager and every filter driver the
// repository configures, so a repository an agent can write to cannot make
// a capture run its programs. What add may hash is what status -uall
// reports: regular files, symlinks and repositories (git skips fifos and
// sockets itself), as the status way's update-index does.
//
// Without git, or outside a work tree, the fallback is the edit-tool paths
// the session collected (ToolEventDiff: each path as status M without line
// counts, source tool-events); no paths is source none. Noop reports source
// none for every turn.
//
// Concurrency: a Capturer is used by one actor, from goroutines the actor
// owns (captures run git and take time); Git keeps a turn's state in the
// Baseline, its per-session cache and snapshot under mutexes (Begin,
// Finish and Settle take the snapshot's lock in turn), and is safe for
// concurrent use. The snapshot's directory is removed by Close or once the
// Git is collected. Capture problems
// never fail a turn: Begin never returns an error from Git (a failed
// baseline rides in the Baseline), and Finish turns any problem, a panic
// included, into source none with the problem in TurnDiff.Warning.
//
// Testing: the tests build real temporary repositories (HOME is a temporary
// directory; user.name and user.email are set per repository) and drive
// Begin, a turn's edits and Finish; TestGitRunsPerTurn counts the git runs
// of each kind of turn, on its path and after, through a logging wrapper; BenchmarkCapture and BenchmarkBareGit
// time the capture against the bare git commands of seed 000 §6 on a
// generated 10,000-file repository in the same run.
package diffcapture

import (
	"context"

	"github.com/codesession/codesession/messages"
)

// Baseline is whatever a Capturer needs to remember from turn start.
type Baseline any

// Capturer snapshots before a turn and diffs after it.
type Capturer interface {
	// Begin records the state of the workspace before a turn.
	Begin(ctx context.Context) (Baseline, error)
	// Finish returns what changed since b. editPaths are the paths the
	// agent's edit tools named during the turn (the fallback when git is not
	// available). It never fails: problems are reported in the diff's
	// Warning with source none.
	Finish(ctx context.Context, b Baseline, editPaths []string) messages.TurnDiff
}

// Settler is a Capturer with work it can do after an answer of Begin or
// Finish was handed back, off the turn's path (Git writes the tree of the
// snapshot it took). The session's differ calls Settle after each answer;
// the Capturer serializes it with the next Begin and Finish, which do what
// is still left themselves. It never fails: a problem shows in the next
// Finish.
type Settler interface {
	Settle(ctx context.Context)
}

// Preparer is a Capturer that can do a turn's Finish ahead, while the
// turn still runs (Git diffs the work tree as it stands after the agent's
// tools ran); a Finish that finds nothing changed since hands out that
// diff. The session's differ calls Prepare with the turn's baseline after
// a tool result, one at a time. It never fails and never changes what
// Finish reports, only how long Finish takes.
type Preparer interface {
	Prepare(ctx context.Context, b Baseline)
}

// Factory builds the Capturer for a session's working directory and backend.
type Factory func(cwd string, d messages.Descriptor) Capturer

// Noop captures nothing and says so.
type Noop struct{}

func (Noop) Begin(context.Context) (Baseline, error) { return nil, nil }

func (Noop) Finish(context.Context, Baseline, []string) messages.TurnDiff {
	return messages.TurnDiff{Source: messages.DiffNone, Files: []messages.FileChange{}, Summary: "no diff capture configured"}
}

// NoopFactory returns Noop for every session.
func NoopFactory(string, messages.Descriptor) Capturer { return Noop{} }

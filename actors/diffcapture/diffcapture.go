// Package diffcapture computes what each turn of a session changed in its
// working directory (seed 000 §6). Capturer is the seam: the session's
// diff-capture actor calls Begin before a turn reaches the backend and
// Finish after it closes.
//
// Git (NewGit, GitFactory: the runtime's default) is the capture: when the
// working directory is inside a git work tree at Begin, the turn's diff is
// the work tree at Finish against the work tree at Begin. Begin records HEAD
// and the paths of one `git status --porcelain=v2 -z --branch -uall` and hashes the content of every
// path status reported (dirty, staged, unmerged, untracked) into a scratch
// index whose objects live in a private temporary directory (the
// repository's objects are read through the alternates; nothing is written
// into the repository, and GIT_OPTIONAL_LOCKS=0 keeps its index unlocked).
// Finish lists the paths that can differ (one status again while HEAD has
// not moved; after a mid-turn commit diff-index against the start commit and
// ls-files --others; and the paths status reported at Begin), brings a
// scratch index to their content now and diffs it in one run (diff-index
// --cached -M -z: raw and numstat records, then the patch, of which only
// the patch is capped) against the baseline: with a clean tree at Begin
// that is the start commit, limited to the candidates by pathspec; else a
// tree of their baseline content written from the scratch index. Where the
// repository is and the overrides of its filter drivers are found once
// per session (rev-parse, config) and kept while the repository's config
// files are unchanged (cache.go), so a turn on a clean tree runs four git
// processes (two statuses, the scratch index, one diff)
// where it ran eleven: commits made during
// the turn are folded in, files already dirty at Begin show only this turn's
// change, new untracked files are additions, and renames are found across
// tracked and untracked files alike. The result is capped: the unified diff
// at DefaultMaxDiffBytes (Truncated, with a marker line), the file list at
// DefaultMaxFiles (FilesOmitted counts the rest); the summary covers every
// file. git runs without a shell (see run.go), with NUL-delimited output, a
// timeout, a scrubbed environment, and command-line configuration that
// switches off hooks, fsmonitor, external diff, textconv, the pager and
// every filter driver the repository configures, so a repository an agent
// can write to cannot make a capture run its programs.
//
// Without git, or outside a work tree, the fallback is the edit-tool paths
// the session collected (ToolEventDiff: each path as status M without line
// counts, source tool-events); no paths is source none. Noop reports source
// none for every turn.
//
// Concurrency: a Capturer is used by one actor, one call at a time, from a
// goroutine the actor owns (captures run git and take time); Git keeps a
// turn's state in the Baseline, its per-session cache under a mutex, and is
// safe for concurrent use. Capture problems
// never fail a turn: Begin never returns an error from Git (a failed
// baseline rides in the Baseline), and Finish turns any problem, a panic
// included, into source none with the problem in TurnDiff.Warning.
//
// Testing: the tests build real temporary repositories (HOME is a temporary
// directory; user.name and user.email are set per repository) and drive
// Begin, a turn's edits and Finish; TestGitRunsPerTurn counts the git runs
// of each kind of turn through a logging wrapper; BenchmarkCapture and BenchmarkBareGit
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

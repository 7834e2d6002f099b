package diffcapture

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// DefaultTimeout bounds one Begin or one Finish of the git capture.
const DefaultTimeout = 30 * time.Second

// Empty trees of the two object formats git knows; git has them built in.
const (
	emptyTreeSHA1   = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	emptyTreeSHA256 = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
)

// Option adjusts a Git capturer.
type Option func(*Git)

// WithGitBinary runs bin instead of the git found on PATH (a path that does
// not exist makes git unavailable: the tool-event fallback).
func WithGitBinary(bin string) Option { return func(g *Git) { g.bin = bin } }

// WithTimeout bounds each Begin and each Finish (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(g *Git) { g.timeout = d } }

// WithMaxDiffBytes caps the unified diff (default DefaultMaxDiffBytes).
func WithMaxDiffBytes(n int) Option { return func(g *Git) { g.maxBytes = n } }

// WithMaxFiles caps the file list (default DefaultMaxFiles).
func WithMaxFiles(n int) Option { return func(g *Git) { g.maxFiles = n } }

// ScratchDirs makes a private folder for a capture's scratch (an index and
// objects of its own) and returns how to remove it.
type ScratchDirs func() (dir string, remove func(), err error)

// WithScratchDirs has the capture make its scratch folders with mk
// (default: a codesession-diff-* folder in the temporary directory). The
// runtime passes its session's process group's (proc.Group.TempDir),
// which records each folder so that the next boot removes those of a
// daemon that died.
func WithScratchDirs(mk ScratchDirs) Option { return func(g *Git) { g.mkScratch = mk } }

// UseScratchDirs is WithScratchDirs for a capture already made (a Factory
// made it; the runtime then hands it the session's folders). Call it
// before the first Begin.
func (g *Git) UseScratchDirs(mk ScratchDirs) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mkScratch = mk
}

// scratchDirs is the maker of the capture's scratch folders.
func (g *Git) scratchDirs() ScratchDirs {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mkScratch != nil {
		return g.mkScratch
	}
	return tempScratch
}

// tempScratch is the default ScratchDirs.
func tempScratch() (string, func(), error) {
	dir, err := os.MkdirTemp("", "codesession-diff-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// makeScratch makes a scratch folder with its objects folder.
func makeScratch(mk ScratchDirs) (string, func(), error) {
	dir, remove, err := mk()
	if err != nil {
		return "", nil, fmt.Errorf("scratch directory: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "objects"), 0o700); err != nil {
		remove()
		return "", nil, fmt.Errorf("scratch directory: %w", err)
	}
	return dir, remove, nil
}

// Git is the capture of seed 000 §6 for one working directory: git when the
// directory is inside a work tree at the turn's start, else the tool-event
// fallback. Between turns it keeps where the repository is and the
// overrides of its filter drivers, checked against the repository's config
// files at every use (cache.go), and the session's snapshot of the work
// tree (scratch.go). It is safe for concurrent use.
type Git struct {
	cwd      string
	bin      string
	timeout  time.Duration
	maxBytes int
	maxFiles int
	env      []string

	mu        sync.Mutex
	mkScratch ScratchDirs   // nil: tempScratch
	cached    *discovered   // nil until a Begin found a work tree
	none      *noRepository // set while git found no repository around cwd
	prepEnd   time.Time     // when the last Prepare returned
	prepCost  time.Duration // how long it took

	// smu serializes the uses of the session's snapshot (scratch.go):
	// a Begin waits for the previous turn's Settle and Finish.
	smu sync.Mutex
	sc  *scratchState // nil until a Begin seeds it

	witnessOff bool // tests: no witness, git's way at every turn

	panics  []string // recovered since the last diff (panics.go)
	panicAt string   // tests: the function that panics (panics.go)
}

// NewGit returns the capture for cwd. It does no I/O: whether cwd is a work
// tree is decided at each Begin (a directory may become one mid-session).
func NewGit(cwd string, opts ...Option) *Git {
	g := &Git{cwd: cwd, bin: "git", timeout: DefaultTimeout, maxBytes: DefaultMaxDiffBytes, maxFiles: DefaultMaxFiles,
		env: scrubEnv(os.Environ())}
	for _, o := range opts {
		o(g)
	}
	return g
}

// GitFactory is the runtime's default Factory: NewGit for the session's
// cwd. The backend's edit-tool names are already applied by the session,
// which passes only paths from successful edit-tool results to Finish.
func GitFactory(cwd string, _ messages.Descriptor) Capturer { return NewGit(cwd) }

type baseKind int

const (
	kindGit      baseKind = iota + 1
	kindFallback          // no git or no work tree: tool events
	kindBroken            // the baseline could not be taken
	kindScratch           // the session's snapshot (scratch.go)
)

// repo is where a work tree's git lives.
type repo struct {
	top       string // the top of the work tree
	common    string // the repository's common directory (its config)
	gitDir    string // this work tree's git directory (config.worktree)
	objects   string // the repository's object directory
	emptyTree string // the empty tree in the repository's object format
	includes  bool   // its config includes other files: never cached
}

// gitBaseline is the state of the work tree at a turn's start: HEAD, and the
// content of every path git status reported then (dirty, staged, unmerged
// or untracked), hashed into a scratch index whose objects live in a
// private directory (dir) beside the repository, never in it.
type gitBaseline struct {
	kind baseKind
	why  string // kindFallback: why not git; kindBroken: the problem

	repo repo
	head string // "" when HEAD was unborn
	// known maps each path status reported to whether it existed then;
	// the ones that existed are in dir's index with their content.
	known map[string]bool
	dir   string // "" until something needs a scratch index
	rm    func() // removes dir

	// kindScratch: the session's snapshot and its state at Begin
	sc   *scratchState
	snap *snapshot
}

func (g *Git) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout > 0 {
		return context.WithTimeout(ctx, g.timeout)
	}
	return context.WithCancel(ctx)
}

// Begin snapshots the work tree: the session's snapshot brought up to date
// (scratch.go), or, the status way, HEAD and what git status reports with
// the content of every reported path that exists hashed, so Finish diffs
// those against their content now rather than against HEAD. It never
// returns an error: a problem rides in the Baseline and Finish reports it.
func (g *Git) Begin(ctx context.Context) (b Baseline, _ error) {
	defer func() {
		if r := recover(); r != nil {
			b = &gitBaseline{kind: kindBroken, why: fmt.Sprintf("baseline panicked: %v", r)}
		}
	}()
	ctx, cancel := g.bound(ctx)
	defer cancel()
	gb, err := g.begin(ctx)
	if err != nil {
		gb.remove()
		return &gitBaseline{kind: kindBroken, why: "baseline: " + err.Error()}, nil
	}
	return gb, nil
}

func (g *Git) begin(ctx context.Context) (*gitBaseline, error) {
	d, why, err := g.repository(ctx)
	if err != nil {
		return &gitBaseline{}, err
	}
	if why != "" {
		return &gitBaseline{kind: kindFallback, why: why}, nil
	}
	g.smu.Lock()
	sb, ok, err := g.scratchBegin(ctx, d)
	g.smu.Unlock()
	if ok {
		if err != nil {
			return &gitBaseline{}, err
		}
		return sb, nil
	}
	r, rp := d.runner(), d.rp
	// HEAD comes from the same status run (--branch; --no-ahead-behind so an
	// upstream costs nothing)
	out, err := r.output(ctx, statusArgs...)
	if err != nil {
		return &gitBaseline{}, err
	}
	st, err := parseStatusV2(out)
	if err != nil {
		return &gitBaseline{}, err
	}
	b := &gitBaseline{kind: kindGit, repo: rp, head: st.head, known: map[string]bool{}}
	var present []string
	for _, p := range st.paths {
		if _, dup := b.known[p]; dup {
			continue
		}
		ok := indexable(filepath.Join(rp.top, filepath.FromSlash(p)))
		b.known[p] = ok
		if ok {
			present = append(present, p)
		}
	}
	if len(present) == 0 {
		return b, nil
	}
	if err := b.makeDir(g.scratchDirs()); err != nil {
		return b, err
	}
	s := r.scratch(b.dir, rp.objects)
	if _, err := s.input(ctx, nulJoin(present), "update-index", "--add", "--replace", "-z", "--stdin"); err != nil {
		return b, err
	}
	return b, nil
}

// discover finds git, the work tree around g.cwd and its HEAD ("" when
// unborn). A reason (why) instead of a runner means the tool-event fallback
// applies; an error is a problem.
func (g *Git) discover(ctx context.Context) (r *runner, rp repo, head, why string, err error) {
	if g.cwd == "" {
		return nil, repo{}, "", "the session has no working directory", nil
	}
	bin, err := exec.LookPath(g.bin)
	if err != nil {
		return nil, repo{}, "", "git is not available", nil
	}
	r = &runner{bin: bin, dir: g.cwd, env: g.env}
	out, err := r.output(ctx, "rev-parse", "--show-toplevel", "--git-common-dir", "--show-object-format", "--absolute-git-dir", "--verify", "-q", "HEAD")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil {
		var ge *gitError
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil || !errors.As(err, &ge):
			return nil, repo{}, "", "", err
		case strings.Contains(ge.stderr, "not a git repository"):
			return nil, repo{}, "", whyNoRepository, nil
		case strings.Contains(ge.stderr, "must be run in a work tree"):
			return nil, repo{}, "", whyNoWorkTree, nil
		case errors.As(err, &ee) && ee.ExitCode() == 1 && len(lines) == 4:
			// --verify -q failed quietly: HEAD names no commit yet (unborn)
		default:
			if _, statErr := os.Stat(g.cwd); statErr != nil {
				return nil, repo{}, "", "", fmt.Errorf("working directory: %w", statErr)
			}
			return nil, repo{}, "", "", err
		}
	}
	if len(lines) < 4 || lines[0] == "" {
		return nil, repo{}, "", whyNoWorkTree, nil
	}
	if len(lines) > 4 {
		head = lines[4]
	}
	rp = repo{top: lines[0], objects: lines[1], gitDir: lines[3]}
	if !filepath.IsAbs(rp.objects) {
		rp.objects = filepath.Join(g.cwd, rp.objects)
	}
	rp.common = rp.objects
	rp.objects = filepath.Join(rp.objects, "objects")
	switch lines[2] {
	case "sha1":
		rp.emptyTree = emptyTreeSHA1
	case "sha256":
		rp.emptyTree = emptyTreeSHA256
	default:
		return nil, repo{}, "", "", fmt.Errorf("unknown object format %q", lines[2])
	}
	r.dir = rp.top
	if r.filters, rp.includes, err = r.filterOverrides(ctx); err != nil {
		return nil, repo{}, "", "", err
	}
	return r, rp, head, "", nil
}

// indexable says whether path holds something git can put in an index: a
// file, a symlink, or a directory that is a repository (a submodule).
func indexable(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	switch {
	case fi.Mode().IsRegular(), fi.Mode()&fs.ModeSymlink != 0:
		return true
	case fi.IsDir():
		_, err := os.Lstat(filepath.Join(path, ".git"))
		return err == nil
	}
	return false
}

// makeDir makes the baseline's scratch folder with mk, once.
func (b *gitBaseline) makeDir(mk ScratchDirs) error {
	if b.dir != "" {
		return nil
	}
	dir, rm, err := makeScratch(mk)
	if err != nil {
		return err
	}
	b.dir, b.rm = dir, rm
	// a baseline dropped without Finish (a turn abandoned, the actor
	// restarted) still removes its scratch directory once collected
	runtime.AddCleanup(b, func(rm func()) { rm() }, rm)
	return nil
}

func (b *gitBaseline) remove() {
	if b != nil && b.dir != "" {
		b.rm()
		b.dir = ""
	}
}

// Finish diffs the work tree now against the baseline: the session's
// snapshot brought up to date against the tree of the one Begin took, or,
// the status way, a tree of the baseline (HEAD at Begin with the reported
// paths' content then) against the work tree now, both built in a scratch
// index from only the paths that can differ. Commits made during the
// turn are folded in (the work tree is compared, not HEAD), files already
// dirty at Begin show only this turn's change, and untracked files are
// additions. It never fails: problems become source none with a warning.
func (g *Git) Finish(ctx context.Context, base Baseline, editPaths []string) (d messages.TurnDiff) {
	defer func() {
		if r := recover(); r != nil {
			g.recovered("Finish", r)
			d = noneDiff("diff capture failed")
		}
		d = g.withPanics(d)
	}()
	g.injectPanic("Finish")
	b, _ := base.(*gitBaseline)
	if b == nil {
		return noneDiff("no baseline for this turn")
	}
	defer b.remove()
	switch b.kind {
	case kindFallback:
		return ToolEventDiff(g.cwd, editPaths, g.maxFiles, b.why)
	case kindBroken:
		return noneDiff(b.why)
	}
	ctx, cancel := g.bound(ctx)
	defer cancel()
	d, err := g.finish(ctx, b)
	if err != nil {
		return noneDiff(err.Error())
	}
	return d
}

func (g *Git) finish(ctx context.Context, b *gitBaseline) (messages.TurnDiff, error) {
	d, why, err := g.repository(ctx)
	switch {
	case err != nil:
		return messages.TurnDiff{}, err
	case why != "":
		return messages.TurnDiff{}, fmt.Errorf("git: the work tree is gone (%s)", why)
	case d.rp.top != b.repo.top || d.rp.objects != b.repo.objects:
		return messages.TurnDiff{}, fmt.Errorf("git: the work tree moved during the turn (%s, was %s)", d.rp.top, b.repo.top)
	}
	if b.kind == kindScratch {
		return g.scratchFinish(ctx, b, d)
	}
	r := d.runner()
	start := b.head
	if start == "" {
		start = b.repo.emptyTree
	}
	// the paths that may differ between the baseline and now: those the
	// work tree (through the index) changed against the start commit,
	// those untracked now, and those status reported at Begin. One status
	// says it while HEAD has not moved; after a mid-turn commit (or with
	// unmerged paths, whose status lines name stages, not HEAD) diff-index
	// and ls-files say it against the start commit.
	out, err := r.output(ctx, statusArgs...)
	if err != nil {
		return messages.TurnDiff{}, err
	}
	st, err := parseStatusV2(out)
	if err != nil {
		return messages.TurnDiff{}, err
	}
	changed, untracked := st.changed, st.untracked
	if st.head != b.head || st.unmerged {
		if changed, untracked, err = changedSince(ctx, r, start); err != nil {
			return messages.TurnDiff{}, err
		}
	}

	inIndex := map[string]bool{} // what the scratch index holds
	cand := make([]string, 0, len(b.known)+len(changed)+len(untracked))
	for p, existed := range b.known {
		cand = append(cand, p)
		inIndex[p] = existed
	}
	// the baseline of a path status did not report is its content at the
	// start commit
	var startEntries []byte
	for _, e := range changed {
		p := e.src
		if _, dup := inIndex[p]; dup {
			continue
		}
		cand = append(cand, p)
		inIndex[p] = false
		// (an unmerged path shows its start content too: diff-index
		// compares the tree with the work tree, not the stages)
		if e.srcMode != "000000" {
			startEntries = fmt.Appendf(startEntries, "%s %s\t%s\x00", e.srcMode, e.srcOID, p)
			inIndex[p] = true
		}
	}
	for _, p := range untracked {
		if _, dup := inIndex[p]; !dup {
			cand = append(cand, p)
			inIndex[p] = false
		}
	}
	if len(cand) == 0 {
		return gitDiff(nil, nil, false, g.maxBytes, g.maxFiles), nil
	}
	if err := b.makeDir(g.scratchDirs()); err != nil {
		return messages.TurnDiff{}, err
	}
	s := r.scratch(b.dir, b.repo.objects)
	// With a clean tree at Begin the baseline of every candidate is its
	// content at the start commit: the diff runs against that commit,
	// limited to the candidates by pathspec (literal: GIT_LITERAL_PATHSPECS),
	// and no baseline tree is built. Else (or with more candidates than a
	// command line should carry) a tree of the baseline is written.
	baseTree, limit := start, len(b.known) == 0 && pathBytes(cand) <= maxPathspecBytes
	if !limit {
		if len(startEntries) > 0 {
			if _, err := s.input(ctx, startEntries, "update-index", "-z", "--index-info"); err != nil {
				return messages.TurnDiff{}, err
			}
		}
		baseTree = b.repo.emptyTree
		if len(startEntries) > 0 || slices.ContainsFunc(cand, func(p string) bool { return b.known[p] }) {
			if baseTree, err = writeTree(ctx, s); err != nil {
				return messages.TurnDiff{}, err
			}
		}
	}
	// now bring every candidate to its content in the work tree: files
	// that did not change since Begin keep their hashes (the index's stat
	// data says so), the rest are hashed into the scratch objects
	slices.Sort(cand)
	var update []string
	for _, p := range cand {
		// (with the pathspec diff the scratch index starts empty: nothing
		// to remove from it)
		if indexable(filepath.Join(b.repo.top, filepath.FromSlash(p))) || (inIndex[p] && !limit) {
			update = append(update, p)
		}
	}
	if len(update) > 0 {
		if _, err := s.input(ctx, nulJoin(update), "update-index", "--add", "--remove", "--replace", "-z", "--stdin"); err != nil {
			return messages.TurnDiff{}, err
		}
	}
	// the scratch index now holds the end state: diff it against the
	// baseline tree
	if !limit {
		cand = nil
	}
	return g.diffAgainst(ctx, s, baseTree, cand)
}

// diffAgainst diffs the scratch index of s against tree (limited to
// pathspec, when given) in one run, which says the files (raw and numstat
// records, NUL-terminated) and the patch after them; only the patch is
// capped.
func (g *Git) diffAgainst(ctx context.Context, s *runner, tree string, pathspec []string) (messages.TurnDiff, error) {
	args := []string{"diff-index", "-z", "--raw", "--numstat", "-p", "--no-color",
		"--submodule=short", "--cached", "-M", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", tree}
	if len(pathspec) > 0 {
		args = append(append(args, "--"), pathspec...)
	}
	head, patch, cutOff, err := s.headedRun(ctx, g.maxBytes+1, args...)
	if err != nil {
		return messages.TurnDiff{}, err
	}
	files, err := parseRawNumstat(head)
	if err != nil {
		return messages.TurnDiff{}, err
	}
	if len(files) == 0 {
		return gitDiff(nil, nil, false, g.maxBytes, g.maxFiles), nil
	}
	return gitDiff(files, patch, cutOff, g.maxBytes, g.maxFiles), nil
}

// maxPathspecBytes bounds the candidates a diff takes on its command line
// (far below ARG_MAX); more take the baseline-tree way.
const maxPathspecBytes = 64 << 10

func pathBytes(paths []string) int {
	n := 0
	for _, p := range paths {
		n += len(p) + 1
	}
	return n
}

func writeTree(ctx context.Context, s *runner) (string, error) {
	out, err := s.output(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func nulJoin(paths []string) []byte {
	n := 0
	for _, p := range paths {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for _, p := range paths {
		b = append(b, p...)
		b = append(b, 0)
	}
	return b
}

package diffcapture

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codesession/codesession/messages"
)

// witness proves, without running git, that the work tree is still what
// the session's snapshot S holds, so a turn that changed nothing runs no
// git on its path at all (one git process costs about as much as a whole
// later turn of a fast agent). It is what git's own refresh looks at, taken
// in-process: the stat data S records for each of its entries (a file
// whose content changed has another ctime, whatever was done to its
// mtime), and the stat data of every directory git would look into for
// untracked files (making, removing or renaming an entry in a directory
// changes the directory's mtime and ctime). Directories git would not look
// into are those an ignore rule matches, which a status run names (kept
// until a directory appears that was not there before).
//
// A witness vouches for S only as of the add it was made around: the
// directories are stat'ed before that add (an entry made after the stat
// changes the directory again; one made before it is in S), S's entries
// after it. Neither may be racily clean: anything stamped at or after the
// clock reading taken before the walk could change again within the same
// timestamp (git's own racy-git rule), so the witness is only made when
// every stamp is older. It is made only on file systems known to keep
// sub-second timestamps locally (not a network file system, whose stat
// data may be cached), and never for an index with entries git would not
// stat (assume-unchanged, skip-worktree, intent-to-add, unmerged).
type witness struct {
	top   string
	files []stamped // S's entries, with the stat data S records
	dirs  []stamped // the directories git looks into, as stat'ed before the add (the top first)
}

// stamped is what a witness compares of one path; index entries keep 32
// bits of the inode and size, as git compares them.
type stamped struct {
	rel            string // from the top, slash-separated ("." for the top)
	mtime, ctime   int64  // nanoseconds
	ino            uint32
	size           uint32
	reg, exec, sym bool // files: the kind of entry S holds
}

// holds says whether every path is as the witness recorded it. Paths are
// looked up from the top's directory, which is itself checked by its path
// first (a top replaced since is another inode).
func (w *witness) holds() bool {
	var st unix.Stat_t
	if len(w.dirs) == 0 || unix.Lstat(w.top, &st) != nil || !w.dirs[0].same(&st) {
		return false
	}
	fd, err := unix.Open(w.top, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	for i := range w.dirs[1:] {
		d := &w.dirs[1+i]
		if unix.Fstatat(fd, d.rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || !d.same(&st) {
			return false
		}
	}
	for i := range w.files {
		f := &w.files[i]
		if unix.Fstatat(fd, f.rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || !f.same(&st) {
			return false
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if !f.reg || (st.Mode&0o100 != 0) != f.exec {
				return false
			}
		case unix.S_IFLNK:
			if !f.sym {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (s *stamped) same(st *unix.Stat_t) bool {
	return s.mtime == st.Mtim.Nano() && s.ctime == st.Ctim.Nano() && s.ino == uint32(st.Ino) && s.size == uint32(st.Size)
}

// errNoWitness says the work tree cannot be vouched for in-process right
// now: every turn takes git's way until a later Settle makes a witness.
var errNoWitness = errors.New("no witness")

// errReplaced says a directory was replaced by something else while walked.
var errReplaced = errors.New("a directory was replaced while walked")

// errRacy says a stamp is too new to vouch for: the same Settle tries again
// once the clock has moved past it.
type errRacy struct{ newest int64 }

func (e errRacy) Error() string { return "racily clean" }

// witnessFiles reads the entries of the index file at path (S) as a
// witness records them; those stamped at or after cutoff make it racy.
func witnessFiles(path string, hashSize int, cutoff int64) ([]stamped, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []stamped
	var bad error
	newest := int64(0)
	split, err := walkIndex(b, hashSize, func(e indexEntry) bool {
		if e.flags&0xb000 != 0 || e.ext&0x6000 != 0 {
			bad = errNoWitness // assume-valid, a stage, skip-worktree, intent-to-add
			return false
		}
		f := stamped{rel: string(e.name),
			ctime: stampNano(e.stat[0:8]), mtime: stampNano(e.stat[8:16]),
			ino: binary.BigEndian.Uint32(e.stat[20:24]), size: binary.BigEndian.Uint32(e.stat[36:40])}
		switch e.mode & 0o170000 {
		case 0o100000:
			f.reg, f.exec = true, e.mode&0o111 != 0
		case 0o120000:
			f.sym = true
		default:
			bad = errNoWitness // a gitlink: S takes the status way
			return false
		}
		newest = max(newest, f.mtime, f.ctime)
		out = append(out, f)
		if len(out) > maxWitnessFiles {
			bad = errNoWitness
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case split:
		return nil, errNoWitness
	case bad != nil:
		return nil, bad
	case newest >= cutoff:
		return nil, errRacy{newest: newest}
	}
	return out, nil
}

func stampNano(b []byte) int64 {
	return int64(binary.BigEndian.Uint32(b[0:4]))*1e9 + int64(binary.BigEndian.Uint32(b[4:8]))
}

// maxWitnessDirs bounds the directories a witness walks: a work tree with
// more takes git's way every turn (git itself walks them then).
const maxWitnessDirs = 20000

// maxWitnessFiles bounds the entries a witness keeps (a path and its stat
// data each, per session): a bigger work tree takes git's way every turn.
const maxWitnessFiles = 100000

// walkDirs stats every directory under top git would look into for
// untracked files: all but .git and those ignored names (relative paths,
// slash-separated, as status prints them without the trailing slash).
// fresh says a directory was found that is not in known (or known is
// nil): its ignore rules are not known yet. newest is the newest stamp seen.
func walkDirs(top string, ignored, known map[string]bool) (dirs []stamped, rel map[string]bool, fresh bool, newest int64, err error) {
	rel = map[string]bool{}
	fresh = known == nil
	var walk func(abs, name string) error
	walk = func(abs, name string) error {
		if len(dirs) >= maxWitnessDirs {
			return errNoWitness
		}
		var st unix.Stat_t
		if err := unix.Lstat(abs, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return errReplaced // the next Settle walks again
		}
		d := stamped{rel: cmp.Or(name, "."), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: uint32(st.Ino), size: uint32(st.Size)}
		dirs = append(dirs, d)
		newest = max(newest, d.mtime, d.ctime)
		if name != "" {
			rel[name] = true
			if known != nil && !known[name] {
				fresh = true
			}
		}
		ents, err := os.ReadDir(abs)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.IsDir() || e.Name() == ".git" {
				continue
			}
			sub := e.Name()
			if name != "" {
				sub = name + "/" + sub
			}
			if ignored[sub] {
				continue
			}
			if err := walk(filepath.Join(abs, e.Name()), sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top, ""); err != nil {
		return nil, nil, false, 0, err
	}
	return dirs, rel, fresh, newest, nil
}

// newestOnDisk is the newest mtime or ctime of the paths the index file at
// path (S) holds, as they are on disk now (paths gone count for nothing).
func newestOnDisk(path, top string, hashSize int) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	newest := int64(0)
	var st unix.Stat_t
	_, err = walkIndex(b, hashSize, func(e indexEntry) bool {
		if unix.Lstat(filepath.Join(top, filepath.FromSlash(string(e.name))), &st) == nil {
			newest = max(newest, st.Mtim.Nano(), st.Ctim.Nano())
		}
		return true
	})
	return newest, err
}

// ignoredDirArgs lists what ignore rules match, a directory matched as a
// whole once ("! dir/") with nothing under it: the directories git does not
// look into.
var ignoredDirArgs = []string{"status", "--porcelain=v2", "-z", "--ignored=matching", "--untracked-files=all",
	"--no-renames", "--ignore-submodules=all"}

// parseIgnoredDirs reads the ignored directories of ignoredDirArgs' output.
func parseIgnoredDirs(out []byte) map[string]bool {
	dirs := map[string]bool{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if p, ok := bytes.CutPrefix(rec, []byte("! ")); ok && bytes.HasSuffix(p, []byte("/")) {
			dirs[string(p[:len(p)-1])] = true
		}
	}
	return dirs
}

// localStamps says whether the file system holding dir keeps its stat data
// locally, with sub-second timestamps (where a witness may vouch).
func localStamps(dir string) bool {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return false
	}
	switch int64(fs.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC:
		return true
	}
	return false
}

// fsClock reads the clock file timestamps are taken from (the coarse
// one; a fine-grained timestamp is never older than it).
func fsClock() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

// witnessTries bounds the attempts at a witness one Settle makes when
// stamps are too new (each waits for the clock to pass them first).
const witnessTries = 3

// witnessRounds bounds how often one maker goes again for callers that
// came while it was making the witness (each round is one makeWitnessOnce).
const witnessRounds = 3

// makeWitness is the part of Settle (and of Prepare) that makes the next
// witness when none holds: walk the directories, bring S up to date (one
// add, taking what changed since the last capture point, as a Begin would),
// and read S's entries. The ignored directories are listed again (one
// status) when the walk found a directory it had not seen. Runs beside the
// turn or the driver's read, one at a time; takes smu only for the add and
// the reading of S.
//
// A caller that finds another making the witness leaves the work to it,
// and the maker goes once more when it is done: its own try may have
// failed, or been of a tree that changed since (a Settle after a turn's
// Finish can come while a Settle from the turn's Begin is still making
// one). Were that caller's request dropped, no witness would be made
// until the next turn's Finish, and every turn until then would take
// git's way.
func (g *Git) makeWitness(ctx context.Context, d *discovered) {
	for range witnessRounds {
		if !g.makeWitnessOnce(ctx, d) {
			return
		}
		var why string
		var err error
		if d, why, err = g.repository(ctx); err != nil || why != "" {
			return
		}
		// the witness this round made may be of the tree before the
		// change the other caller saw (a file removed after the walk
		// leaves no newer stamp in S to make the witness racy)
		g.smu.Lock()
		if sc := g.sc; sc != nil && sc.wit != nil && !sc.wit.holds() {
			sc.wit = nil
		}
		g.smu.Unlock()
	}
}

// makeWitnessOnce is one round of makeWitness; again says another caller
// asked for a witness while this one was making it.
func (g *Git) makeWitnessOnce(ctx context.Context, d *discovered) (again bool) {
	g.smu.Lock()
	sc := g.sc
	ok := sc != nil && !g.witnessOff && sc.wit == nil && !sc.noWitness && !sc.statusWay && !sc.reseed && sc.disc == d && sc.repo == d.rp
	if ok && sc.making {
		sc.again = true // the maker goes once more
		ok = false
	}
	var ignored, known map[string]bool
	if ok {
		sc.making, sc.again = true, false
		ignored, known = sc.ignoredDirs, sc.knownDirs
	}
	g.smu.Unlock()
	if !ok {
		return false
	}
	defer func() {
		g.smu.Lock()
		sc.making = false
		again, sc.again = sc.again, false
		g.smu.Unlock()
	}()
	if !localStamps(d.rp.top) {
		g.smu.Lock()
		sc.noWitness = true
		g.smu.Unlock()
		return
	}
	s := d.runner().scratch(sc.dir, sc.repo.objects)
	for range witnessTries {
		// every stamp in sight must be older than the clock reading the
		// witness is made under: wait for the clock first, rather than
		// run an add whose result could not be vouched for
		cutoff := fsClock()
		dirs, rel, fresh, newest, err := walkDirs(d.rp.top, ignored, known)
		if err == nil && fresh {
			// directories whose ignore rules are not known: list the
			// ignored ones (one status), then walk again
			out, serr := s.output(ctx, ignoredDirArgs...)
			if serr != nil {
				return
			}
			ignored = parseIgnoredDirs(out)
			cutoff = fsClock()
			dirs, rel, _, newest, err = walkDirs(d.rp.top, ignored, map[string]bool{})
		}
		switch {
		case errors.Is(err, errNoWitness):
			g.smu.Lock()
			sc.noWitness = true
			g.smu.Unlock()
			return
		case err != nil:
			return
		}
		known = rel
		onDisk, err := newestOnDisk(sc.index(), d.rp.top, d.rp.hashSize())
		if err != nil {
			return
		}
		if newest = max(newest, onDisk); newest >= cutoff {
			if !waitPast(ctx, newest) {
				return
			}
			continue
		}
		err = g.refreshForWitness(ctx, sc, d, s, &witness{top: d.rp.top, dirs: dirs}, cutoff, ignored, known)
		var racy errRacy
		if !errors.As(err, &racy) || !waitPast(ctx, racy.newest) {
			return
		}
	}
	return
}

// refreshForWitness is makeWitness's add and reading of S, under smu; w
// becomes the session's witness when S's entries can be vouched for.
func (g *Git) refreshForWitness(ctx context.Context, sc *scratchState, d *discovered, s *runner, w *witness, cutoff int64, ignored, known map[string]bool) error {
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.sc != sc || sc.wit != nil || sc.reseed || sc.statusWay || sc.disc != d || sc.seed != seedStamp(d.rp) {
		return errNoWitness
	}
	sc.ignoredDirs, sc.knownDirs = ignored, known
	out, err := s.output(ctx, addArgs...)
	if err != nil {
		g.dropScratch()
		return err
	}
	if len(out) > 0 {
		// the work tree changed since the last capture point: S holds it
		// now, so the current snapshot is no longer S (the next Begin
		// takes one; a Finish diffs S against its baseline's tree). It
		// is not dropped: it may be the baseline of a turn running now.
		sc.cur = nil
		if namesIgnoreFile(out) {
			sc.reseed = true
			return errNoWitness
		}
	}
	files, err := witnessFiles(sc.index(), d.rp.hashSize(), cutoff)
	if err != nil {
		if errors.Is(err, errNoWitness) {
			sc.noWitness = true
		}
		return err
	}
	w.files = files
	sc.wit = w
	return nil
}

// waitPast sleeps until the file-system clock is past stamp, and says
// whether it is. A stamp more than a moment ahead (a file dated in the
// future, a clock set back) is not waited for.
func waitPast(ctx context.Context, stamp int64) bool {
	// the coarse clock moves a tick (1-10 ms) at a time: look again each
	// millisecond, for up to a tenth of a second
	for range 100 {
		if fsClock() > stamp {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return false
}

// prepared is a turn's diff computed before the turn ended (Prepare): S
// against the tree of base, under the witness wit. It is the turn's diff at
// Finish while wit is still the session's witness and holds (S is the work
// tree still, and S has not moved since: every add either clears the
// witness or makes a new one).
type prepared struct {
	wit  *witness
	base *snapshot
	diff messages.TurnDiff
}

// Prepare does, in the middle of a turn, what the turn's Finish would do:
// it brings S to the work tree and makes a witness of it (one add, as
// Settle does) and diffs S against the baseline's tree (one diff), so a
// Finish that finds the work tree unchanged since hands that diff out
// without running git. The session's differ calls it after the agent's
// tools ran, beside the rest of the turn. It never fails and changes
// nothing a Finish reports: a Finish that finds the witness gone or not
// holding takes its own way.
func (g *Git) Prepare(ctx context.Context, base Baseline) {
	defer func() {
		if r := recover(); r != nil {
			g.recovered("Prepare", r) // Finish takes its own way, and says why
		}
	}()
	g.injectPanic("Prepare")
	b, _ := base.(*gitBaseline)
	if b == nil || b.kind != kindScratch || g.witnessOff {
		return
	}
	defer g.removeIfDropped(b.sc)
	// at most half of the time in Prepare: a turn with many tools in a
	// big work tree must not keep git running beside them all along (a
	// Prepare skipped costs its Finish an add and a diff, no more)
	g.mu.Lock()
	busy := time.Since(g.prepEnd) < g.prepCost
	g.mu.Unlock()
	if busy {
		return
	}
	start := time.Now()
	defer func() {
		g.mu.Lock()
		g.prepEnd, g.prepCost = time.Now(), time.Since(start)
		g.mu.Unlock()
	}()
	ctx, cancel := g.bound(ctx)
	defer cancel()
	d, why, err := g.repository(ctx)
	if err != nil || why != "" || d.rp != b.repo {
		return
	}
	if b.snap.write(ctx, d, b.sc.dir) != nil {
		return
	}
	g.smu.Lock()
	if g.sc == b.sc && g.sc.wit != nil && !g.sc.wit.holds() {
		g.sc.wit = nil
	}
	g.smu.Unlock()
	g.makeWitness(ctx, d)
	g.smu.Lock()
	sc := g.sc
	if sc != b.sc || sc.wit == nil || sc.cur == b.snap || (sc.prep != nil && sc.prep.wit == sc.wit && sc.prep.base == b.snap) {
		g.smu.Unlock()
		return // no witness; nothing changed; or prepared already
	}
	diff, err := g.diffAgainst(ctx, d.runner().scratch(sc.dir, sc.repo.objects), b.snap.tree, nil)
	if err != nil {
		g.smu.Unlock()
		return
	}
	sc.prep = &prepared{wit: sc.wit, base: b.snap, diff: diff}
	// S as it stands is the next turn's baseline unless something
	// changes: take it (its tree is written after the answer, by Settle,
	// rather than beside the agent's work on two cores)
	if sc.cur == nil && sc.take() != nil {
		g.dropScratch()
	}
	g.smu.Unlock()
}

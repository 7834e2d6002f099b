package diffcapture

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/codesession/codesession/messages"
)

// scratchState is a session's persistent snapshot of its work tree: a
// scratch index (S) in a private directory, with the objects its entries
// name in a private object directory beside it (the repository's objects
// read through the alternates). S holds every path of the repository's
// index and every untracked path .gitignore does not exclude, at their
// content as of the last capture point; `git add -A` brings it up to date
// and, with -v, says whether anything changed. Between turns it keeps
// only what a later turn can reuse: S's stat data (so add hashes only what
// changed) and the tree of S as it stands (the next turn's baseline when
// nothing changed in between).
type scratchState struct {
	dir    string
	remove func() // removes dir
	repo   repo
	disc   *discovered // the discovery S was seeded under (a new one re-seeds)

	seed      string    // stamp of the repository's index and excludes S was seeded from
	reseed    bool      // .gitignore changed: seed again at the next Begin
	cur       *snapshot // S's content as it stands; nil until taken
	statusWay bool      // S holds a gitlink: the last Begin took the status way
	taken     int       // snapshots taken (names their copies)

	// witness.go: the proof that the work tree is still S, when one holds
	wit         *witness
	making      bool            // a Settle is making the witness
	again       bool            // another asked meanwhile: the maker goes once more
	noWitness   bool            // none can be made for S as seeded (a big or remote tree, an index git would not stat)
	ignoredDirs map[string]bool // the directories ignore rules match as a whole
	knownDirs   map[string]bool // the directories the last witness walked
	prep        *prepared       // a diff Prepare computed during the turn
}

// snapshot is one state of S: a copy of S as it was, until the tree of it
// is written (write-tree on the copy, so the next add to S need not wait
// for it).
type snapshot struct {
	mu    sync.Mutex // held while its tree is written
	index string     // the copy; "" once written or dropped
	tree  string
}

// take records S as it stands as the current snapshot (a copy of S; a
// missing S is the empty tree). Callers hold smu.
func (sc *scratchState) take() error {
	if sc.cur != nil {
		sc.cur.drop()
	}
	sc.cur = nil
	in, err := os.ReadFile(sc.index())
	if errors.Is(err, os.ErrNotExist) {
		sc.cur = &snapshot{tree: sc.repo.emptyTree}
		return nil
	}
	if err != nil {
		return fmt.Errorf("scratch snapshot: %w", err)
	}
	sc.taken++
	p := filepath.Join(sc.dir, fmt.Sprintf("snapshot-%d", sc.taken))
	if err := os.WriteFile(p, in, 0o600); err != nil {
		return fmt.Errorf("scratch snapshot: %w", err)
	}
	sc.cur = &snapshot{index: p}
	// a snapshot set aside unwritten (S moved on in a Settle while it may
	// have been a running turn's baseline) removes its copy once collected
	runtime.AddCleanup(sc.cur, func(p string) { _ = os.Remove(p) }, p)
	return nil
}

// drop removes the copy of a snapshot no turn needs any more, unless its
// tree is being written just now (the copy then stays until Close).
func (sn *snapshot) drop() {
	if sn.mu.TryLock() {
		if sn.index != "" {
			_ = os.Remove(sn.index)
			sn.index = ""
		}
		sn.mu.Unlock()
	}
}

// write writes the snapshot's tree if it is not written yet, under d, the
// discovery of the moment (write-tree too runs a clean filter on a racily
// clean entry), with its objects in the private directory dir.
func (sn *snapshot) write(ctx context.Context, d *discovered, dir string) error {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.tree != "" {
		return nil
	}
	if sn.index == "" {
		return errors.New("git: the scratch snapshot of the turn's start is gone")
	}
	tree, err := writeTree(ctx, d.runner().scratchIndex(sn.index, dir, d.rp.objects))
	if err != nil {
		return err
	}
	sn.tree = tree
	_ = os.Remove(sn.index)
	sn.index = ""
	return nil
}

func (sc *scratchState) index() string { return filepath.Join(sc.dir, "index") }

// addArgs brings S to the work tree: tracked paths refreshed (hashing only
// those whose stat data changed), untracked ones .gitignore does not
// exclude added, vanished ones removed. -v prints one line per path whose
// entry changed (add '<path>' / remove '<path>'), nothing for a change of
// stat data alone. advice off: an embedded repository is added as a
// gitlink, as status reports it, without a page of hints on stderr.
var addArgs = []string{"-c", "advice.addEmbeddedRepo=false", "add", "-A", "-v"}

// newScratch makes the private directory of a session's snapshot; it is
// removed by Close, by dropScratch, or once g is collected.
func (g *Git) newScratch(d *discovered) (*scratchState, error) {
	dir, remove, err := makeScratch(g.scratchDirs())
	if err != nil {
		return nil, err
	}
	runtime.AddCleanup(g, func(rm func()) { rm() }, remove)
	return &scratchState{dir: dir, remove: remove, repo: d.rp, disc: d, reseed: true}, nil
}

// dropScratch forgets the session's snapshot (after a failed run S may be
// half written or locked); the next Begin seeds a new one. Callers hold smu.
func (g *Git) dropScratch() {
	if g.sc != nil {
		g.sc.remove()
		g.sc = nil
	}
}

// removeIfDropped removes sc's folder again when the snapshot was dropped
// (Close, a reseed) while a Settle or a Prepare wrote into it without smu:
// git may have written there after the removal, or recreated it.
func (g *Git) removeIfDropped(sc *scratchState) {
	g.smu.Lock()
	dropped := g.sc != sc
	g.smu.Unlock()
	if dropped {
		sc.remove()
	}
}

// Close removes the session's scratch directory. The capture stays usable:
// a later Begin starts a new one.
func (g *Git) Close() error {
	g.smu.Lock()
	defer g.smu.Unlock()
	g.dropScratch()
	return nil
}

// seedStamp identifies the repository's index and info/exclude as they
// are: a change to either (the agent staged, committed, checked out, or
// changed what is ignored) seeds S again.
func seedStamp(rp repo) string {
	return fileStamp(filepath.Join(rp.gitDir, "index")) + "|" + fileStamp(filepath.Join(rp.common, "info", "exclude"))
}

// seedFrom replaces S with a copy of the repository's index (its stat data
// makes the add that follows hash only what differs from it), keeping the
// index's times so git judges racily clean entries as it would in the
// original. No index (a repository with nothing staged yet): S starts empty.
func (sc *scratchState) seedFrom(rp repo) error {
	sc.seed, sc.reseed = seedStamp(rp), false
	sc.wit, sc.noWitness, sc.ignoredDirs, sc.knownDirs = nil, false, nil, nil
	if sc.cur != nil {
		sc.cur.drop()
		sc.cur = nil
	}
	src := filepath.Join(rp.gitDir, "index")
	_ = os.Remove(sc.index())
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seed the scratch index: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("seed the scratch index: %w", err)
	}
	out, err := os.OpenFile(sc.index(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("seed the scratch index: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("seed the scratch index: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("seed the scratch index: %w", err)
	}
	if err := os.Chtimes(sc.index(), fi.ModTime(), fi.ModTime()); err != nil {
		return fmt.Errorf("seed the scratch index: %w", err)
	}
	return nil
}

// scratchBegin takes the turn's baseline from S: one add (-v says whether
// the work tree changed since S was last brought up to date); the tree of
// the baseline is written later (Settle) unless S is unchanged since a
// tree of it was written. ok false: this turn takes the status way (S
// holds a gitlink, whose refresh would run git status inside the
// submodule, under that repository's own configuration). Callers hold smu.
func (g *Git) scratchBegin(ctx context.Context, d *discovered) (b *gitBaseline, ok bool, err error) {
	sc := g.sc
	if sc != nil && sc.repo != d.rp {
		g.dropScratch()
		sc = nil
	}
	seeded := false
	if sc == nil {
		if sc, err = g.newScratch(d); err != nil {
			return nil, true, err
		}
		g.sc = sc
	}
	if sc.disc != d {
		// the config was read again (it changed, or it includes files):
		// what it ignores may have changed too
		sc.disc, sc.reseed = d, true
	}
	if sc.reseed || sc.seed != seedStamp(d.rp) {
		if err := sc.seedFrom(d.rp); err != nil {
			g.dropScratch()
			return nil, true, err
		}
		seeded = true
	}
	if !seeded && sc.wit != nil && sc.wit.holds() {
		// nothing changed since S was last brought up to date: no git
		if sc.cur == nil {
			if err := sc.take(); err != nil {
				g.dropScratch()
				return nil, true, err
			}
		}
		return &gitBaseline{kind: kindScratch, repo: d.rp, sc: sc, snap: sc.cur}, true, nil
	}
	sc.wit = nil
	links, err := indexHasGitlink(sc.index(), d.rp.hashSize())
	if sc.statusWay = err != nil || links; sc.statusWay {
		return nil, false, nil
	}
	s := d.runner().scratch(sc.dir, d.rp.objects)
	for {
		out, err := s.output(ctx, addArgs...)
		if err != nil {
			g.dropScratch()
			return nil, true, err
		}
		if len(out) > 0 && sc.cur != nil {
			sc.cur.drop()
			sc.cur = nil
		}
		// an ignore rule changed since the last capture point: S may hold
		// paths that are ignored now, which status -uall would not report.
		// Seed again (once) so the baseline is what status would see.
		if seeded || !namesIgnoreFile(out) {
			break
		}
		if err := sc.seedFrom(d.rp); err != nil {
			g.dropScratch()
			return nil, true, err
		}
		seeded = true
	}
	if sc.cur == nil {
		if err := sc.take(); err != nil {
			g.dropScratch()
			return nil, true, err
		}
	}
	return &gitBaseline{kind: kindScratch, repo: d.rp, sc: sc, snap: sc.cur}, true, nil
}

// unchanged says whether the work tree is S still, as S was seeded under
// d: the witness holds (with max > 0, only a witness of at most max paths
// is looked at). Callers hold smu.
func (sc *scratchState) unchanged(d *discovered, max int) bool {
	return sc.wit != nil && !sc.reseed && sc.disc == d && sc.seed == seedStamp(d.rp) &&
		(max <= 0 || len(sc.wit.files)+len(sc.wit.dirs) <= max) && sc.wit.holds()
}

// diffAsItStands is the diff of a turn whose work tree is S still (see
// unchanged), when it needs no git: none, S being the baseline snapshot
// still, or what Prepare diffed during the turn. Callers hold smu.
func (g *Git) diffAsItStands(sc *scratchState, b *gitBaseline) (messages.TurnDiff, bool) {
	if b.snap == sc.cur {
		return gitDiff(nil, nil, false, g.maxBytes, g.maxFiles), true
	}
	if p := sc.prep; p != nil && p.wit == sc.wit && p.base == b.snap {
		return p.diff, true
	}
	return messages.TurnDiff{}, false
}

// namesIgnoreFile says whether add -v output names a .gitignore.
func namesIgnoreFile(out []byte) bool { return bytes.Contains(out, []byte(".gitignore'")) }

// Settle does the work the last Begin or Finish left for after its answer
// was handed back: writing the tree of the snapshot it took (the baseline
// of this turn, or of the next one when nothing changes in between). The
// session's differ calls it while the turn runs or the driver reads; it
// works on the snapshot's own copy, so a Begin or Finish meanwhile need not
// wait for it unless it needs that very tree (then it waits, or writes the
// tree itself when Settle has not run).
func (g *Git) Settle(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			g.recovered("Settle", r) // never fails a turn: Finish sees a lost snapshot, and says why
		}
	}()
	g.injectPanic("Settle")
	ctx, cancel := g.bound(ctx)
	defer cancel()
	g.smu.Lock()
	sc := g.sc
	if sc == nil || sc.statusWay {
		g.smu.Unlock()
		return
	}
	sn, dir := sc.cur, sc.dir
	g.smu.Unlock()
	defer g.removeIfDropped(sc)
	d, why, err := g.repository(ctx)
	if err != nil || why != "" || d.rp != sc.repo {
		return
	}
	if sn != nil {
		_ = sn.write(ctx, d, dir)
	}
	g.makeWitness(ctx, d)
}

// scratchFinish diffs S brought to the work tree now against the tree of
// the turn's baseline snapshot: one add, and one diff when the add changed
// anything. The tree of S after the turn is left for Settle.
func (g *Git) scratchFinish(ctx context.Context, b *gitBaseline, d *discovered) (messages.TurnDiff, error) {
	g.smu.Lock()
	defer g.smu.Unlock()
	sc := g.sc
	if sc == nil || sc != b.sc {
		return messages.TurnDiff{}, errors.New("git: the scratch snapshot of the turn's start is gone")
	}
	if sc.repo != d.rp {
		return messages.TurnDiff{}, fmt.Errorf("git: the work tree moved during the turn (%s, was %s)", d.rp.top, sc.repo.top)
	}
	s := d.runner().scratch(sc.dir, sc.repo.objects)
	if sc.unchanged(d, 0) {
		// the work tree is S still: no add
		if diff, ok := g.diffAsItStands(sc, b); ok {
			return diff, nil
		}
		// a Settle during the turn brought S up to date: diff it
		if err := b.snap.write(ctx, d, sc.dir); err != nil {
			return messages.TurnDiff{}, err
		}
		if sc.cur == nil {
			if err := sc.take(); err != nil {
				g.dropScratch()
				return messages.TurnDiff{}, err
			}
		}
		return g.diffAgainst(ctx, s, b.snap.tree, nil)
	}
	sc.wit = nil
	if err := b.snap.write(ctx, d, sc.dir); err != nil {
		return messages.TurnDiff{}, err
	}
	// runs under the discovery of this Finish: a filter driver configured
	// during the turn is switched off too
	out, err := s.output(ctx, addArgs...)
	if err != nil {
		g.dropScratch()
		return messages.TurnDiff{}, err
	}
	if seedStamp(d.rp) != sc.seed {
		// the repository's index changed during the turn: a path staged
		// past .gitignore is in the turn's diff, as status reports it
		forced, err := sc.forcedPaths(d.rp)
		if err != nil {
			return messages.TurnDiff{}, err
		}
		if len(forced) > 0 {
			more, err := s.input(ctx, nulJoin(forced), "add", "-f", "-v", "--pathspec-from-file=-", "--pathspec-file-nul")
			if err != nil {
				g.dropScratch()
				return messages.TurnDiff{}, err
			}
			out = append(out, more...)
		}
	}
	if len(out) == 0 && b.snap == sc.cur {
		// S is the baseline snapshot still: nothing changed
		return gitDiff(nil, nil, false, g.maxBytes, g.maxFiles), nil
	}
	// S changed during the turn, by this add or by a Settle's (whose add
	// dropped the current snapshot): S as it stands is the next turn's
	// baseline. Taking it only when this add changed something would leave
	// no snapshot after a Settle that came late, and every later Begin
	// would take git's way until a turn changed something again.
	if len(out) > 0 || sc.cur == nil {
		if err := sc.take(); err != nil {
			g.dropScratch()
			return messages.TurnDiff{}, err
		}
		if namesIgnoreFile(out) {
			sc.reseed = true
		}
	}
	return g.diffAgainst(ctx, s, b.snap.tree, nil)
}

// indexHasGitlink says whether the index file at path holds a gitlink
// (mode 160000), or may (a split index, whose entries are partly in a
// shared index elsewhere). A missing file holds none. It reads index
// versions 2 to 4; hashSize is the repository's object id length.
func indexHasGitlink(path string, hashSize int) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return parseIndexGitlinks(b, hashSize)
}

var errIndexFormat = errors.New("scratch index: unknown format")

// parseIndexGitlinks is indexHasGitlink's parser (fuzzed: the index's
// names come from the work tree).
func parseIndexGitlinks(b []byte, hashSize int) (bool, error) {
	links := false
	split, err := walkIndex(b, hashSize, func(e indexEntry) bool {
		links = e.mode&0o170000 == 0o160000
		return !links
	})
	return links || split, err
}

// indexEntry is one entry of an index file as walkIndex reads it; name and
// stat point into the file's bytes and are valid only during the call.
type indexEntry struct {
	name  []byte
	mode  uint32
	stat  []byte // the 40 bytes of ctime, mtime, dev, ino, mode, uid, gid, size (all 32-bit)
	flags uint16 // assume-valid 0x8000, stage 0x3000
	ext   uint16 // version 3 and up: skip-worktree 0x4000, intent-to-add 0x2000
}

// walkIndex calls fn with each entry of an index file (versions 2 to 4)
// until fn returns false; split says the index is split (its other entries
// are in a shared index elsewhere).
func walkIndex(b []byte, hashSize int, fn func(e indexEntry) bool) (split bool, _ error) {
	if hashSize <= 0 || len(b) < 12+hashSize || string(b[:4]) != "DIRC" {
		return false, errIndexFormat
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return false, errIndexFormat
	}
	n := binary.BigEndian.Uint32(b[8:12])
	end := len(b) - hashSize // the trailing checksum
	pos := 12
	fixed := 40 + hashSize + 2 // times, dev, ino, mode, uid, gid, size; id; flags
	var name []byte            // version 4: the previous name, which the next one shares a prefix of
	for range n {
		if pos+fixed > end {
			return false, errIndexFormat
		}
		start := pos
		e := indexEntry{mode: binary.BigEndian.Uint32(b[pos+24 : pos+28]), stat: b[pos : pos+40],
			flags: binary.BigEndian.Uint16(b[pos+40+hashSize:])}
		pos += fixed
		if version >= 3 && e.flags&0x4000 != 0 {
			if pos+2 > end {
				return false, errIndexFormat
			}
			e.ext = binary.BigEndian.Uint16(b[pos:])
			pos += 2
		}
		if version == 4 {
			// git's offset varint (bytes to strip from the previous name),
			// then the rest of the name, NUL-terminated; no padding
			if pos >= end {
				return false, errIndexFormat
			}
			c := b[pos]
			pos++
			strip := int(c & 0x7f)
			for c&0x80 != 0 {
				if pos >= end || strip > len(name) {
					return false, errIndexFormat
				}
				c = b[pos]
				pos++
				strip = (strip+1)<<7 | int(c&0x7f)
			}
			if strip > len(name) {
				return false, errIndexFormat
			}
			nul := bytes.IndexByte(b[pos:end], 0)
			if nul < 0 {
				return false, errIndexFormat
			}
			name = append(name[:len(name)-strip], b[pos:pos+nul]...)
			pos += nul + 1
			e.name = name
			if !fn(e) {
				return false, nil
			}
			continue
		}
		nul := bytes.IndexByte(b[pos:end], 0)
		if nul < 0 {
			return false, errIndexFormat
		}
		e.name = b[pos : pos+nul]
		if !fn(e) {
			return false, nil
		}
		pos += nul
		// padded with 1 to 8 NULs to a multiple of 8 from the entry's start
		pos = start + (pos-start+8)&^7
		if pos > end {
			return false, errIndexFormat
		}
	}
	// extensions: a 4-byte signature and a 4-byte size each
	for pos+8 <= end {
		sig := string(b[pos : pos+4])
		size := int(binary.BigEndian.Uint32(b[pos+4 : pos+8]))
		if sig == "link" {
			return true, nil
		}
		if size < 0 || size > end-pos-8 {
			return false, errIndexFormat
		}
		pos += 8 + size
	}
	if pos != end {
		return false, errIndexFormat
	}
	return false, nil
}

// forcedPaths lists the files the repository's index holds that S does
// not, though they exist: paths staged past .gitignore (git add -f), which
// add -A does not pick up but status reports. Stages above 0 and gitlinks
// are left out (S takes the status way for those anyway).
func (sc *scratchState) forcedPaths(rp repo) ([]string, error) {
	real, err := os.ReadFile(filepath.Join(rp.gitDir, "index"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mine, err := os.ReadFile(sc.index())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	have := map[string]bool{}
	if len(mine) > 0 {
		if _, err := walkIndex(mine, rp.hashSize(), func(e indexEntry) bool { have[string(e.name)] = true; return true }); err != nil {
			return nil, err
		}
	}
	var out []string
	split, err := walkIndex(real, rp.hashSize(), func(e indexEntry) bool {
		if e.mode&0o170000 != 0o160000 && !have[string(e.name)] {
			p := string(e.name)
			if fi, err := os.Lstat(filepath.Join(rp.top, filepath.FromSlash(p))); err == nil && (fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0) {
				out = append(out, p)
				have[p] = true
			}
		}
		return true
	})
	if err != nil || split {
		return nil, err // a split index: its shared part is not read here
	}
	return out, nil
}

// hashSize is the length of the repository's object ids.
func (rp repo) hashSize() int {
	if rp.emptyTree == emptyTreeSHA256 {
		return 32
	}
	return 20
}

// fileStamp identifies a file's state (identity, size, times); "-" when it
// does not exist.
func fileStamp(path string) string { return strings.TrimSuffix(statStamp(path, true), "|") }

var _ Settler = (*Git)(nil)

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
	dir  string
	repo repo
	disc *discovered // the discovery S was seeded under (a new one re-seeds)

	seed      string    // stamp of the repository's index and excludes S was seeded from
	reseed    bool      // .gitignore changed: seed again at the next Begin
	cur       *snapshot // S's content as it stands
	statusWay bool      // S holds a gitlink: the last Begin took the status way
}

// snapshot is one state of S; tree is "" until written (write-tree).
type snapshot struct{ tree string }

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
	dir, err := os.MkdirTemp("", "codesession-diff-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "objects"), 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	runtime.AddCleanup(g, func(d string) { _ = os.RemoveAll(d) }, dir)
	return &scratchState{dir: dir, repo: d.rp, disc: d, reseed: true, cur: &snapshot{}}, nil
}

// dropScratch forgets the session's snapshot (after a failed run S may be
// half written or locked); the next Begin seeds a new one. Callers hold smu.
func (g *Git) dropScratch() {
	if g.sc != nil {
		_ = os.RemoveAll(g.sc.dir)
		g.sc = nil
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
	sc.seed, sc.reseed, sc.cur = seedStamp(rp), false, &snapshot{}
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
		if len(out) > 0 {
			sc.cur = &snapshot{}
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
	return &gitBaseline{kind: kindScratch, repo: d.rp, sc: sc, snap: sc.cur}, true, nil
}

// namesIgnoreFile says whether add -v output names a .gitignore.
func namesIgnoreFile(out []byte) bool { return bytes.Contains(out, []byte(".gitignore'")) }

// settle writes the tree of S's current snapshot if it is not written yet,
// under d, the discovery of the moment (write-tree too runs a clean filter
// on a racily clean entry). Callers hold smu.
func (g *Git) settle(ctx context.Context, d *discovered) error {
	sc := g.sc
	if sc == nil || sc.cur.tree != "" || sc.statusWay {
		return nil
	}
	if d.rp != sc.repo {
		g.dropScratch()
		return nil
	}
	tree, err := writeTree(ctx, d.runner().scratch(sc.dir, sc.repo.objects))
	if err != nil {
		g.dropScratch()
		return err
	}
	sc.cur.tree = tree
	return nil
}

// Settle does the work the last Begin or Finish left for after its answer
// was handed back: writing the tree of the snapshot it took (the baseline
// of this turn, or of the next one when nothing changes in between). The
// session's differ calls it while the driver reads; Begin and Finish do it
// themselves when it has not run.
func (g *Git) Settle(ctx context.Context) {
	defer func() { _ = recover() }() // never fails a turn: Finish sees a lost snapshot
	ctx, cancel := g.bound(ctx)
	defer cancel()
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.sc == nil || g.sc.cur.tree != "" || g.sc.statusWay {
		return
	}
	d, why, err := g.repository(ctx)
	if err != nil || why != "" {
		g.dropScratch()
		return
	}
	_ = g.settle(ctx, d)
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
	if b.snap.tree == "" {
		if b.snap != sc.cur {
			return messages.TurnDiff{}, errors.New("git: the scratch snapshot of the turn's start was replaced")
		}
		if err := g.settle(ctx, d); err != nil {
			return messages.TurnDiff{}, err
		}
	}
	// runs under the discovery of this Finish: a filter driver configured
	// during the turn is switched off too
	s := d.runner().scratch(sc.dir, sc.repo.objects)
	out, err := s.output(ctx, addArgs...)
	if err != nil {
		g.dropScratch()
		return messages.TurnDiff{}, err
	}
	if len(out) == 0 && b.snap == sc.cur {
		// S is the baseline snapshot still: nothing changed
		return gitDiff(nil, nil, false, g.maxBytes, g.maxFiles), nil
	}
	if len(out) > 0 {
		sc.cur = &snapshot{}
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
	if len(b) < 12+hashSize || string(b[:4]) != "DIRC" {
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
	for range n {
		if pos+fixed > end {
			return false, errIndexFormat
		}
		start := pos
		mode := binary.BigEndian.Uint32(b[pos+24 : pos+28])
		if mode&0o170000 == 0o160000 {
			return true, nil
		}
		flags := binary.BigEndian.Uint16(b[pos+40+hashSize:])
		pos += fixed
		if version >= 3 && flags&0x4000 != 0 {
			pos += 2
		}
		if version == 4 {
			// a varint (bytes to strip from the previous name), then the
			// rest of the name, NUL-terminated; no padding
			for {
				if pos >= end {
					return false, errIndexFormat
				}
				c := b[pos]
				pos++
				if c&0x80 == 0 {
					break
				}
			}
			nul := bytes.IndexByte(b[pos:end], 0)
			if nul < 0 {
				return false, errIndexFormat
			}
			pos += nul + 1
			continue
		}
		nul := bytes.IndexByte(b[pos:end], 0)
		if nul < 0 {
			return false, errIndexFormat
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

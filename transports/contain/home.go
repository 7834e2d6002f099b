package contain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A CLI that lists HOME when it starts (copilot, gemini, qwen: the
// descriptor's Containment.ListsHome) cannot run in a HOME that holds a
// denied path: Landlock only allows, so ~/.ssh is denied by giving read
// rights to each of HOME's other entries and never to HOME itself, and
// the listing fails. Such a CLI runs in a HOME of its own instead, holding
// only links to its declared state in the user's HOME (and the user's git
// config), so the credential denials hold for it as for every other
// backend: the user's ~/.ssh is not in its HOME, and its real path is
// denied.

// sharedConfig are entries of the user's HOME an agent's shell may read
// through its own HOME (git's identity, for the agent's own commits).
var sharedConfig = []string{".gitconfig", ".config/git"}

// isFolder tells a declared state folder from a state file by its name:
// .claude.json is a file, .claude and .cache/copilot folders.
func isFolder(p string) bool {
	base := filepath.Base(p)
	return len(base) < 2 || !strings.Contains(base[1:], ".")
}

// ownHomeRoot is where own HOMEs are laid out: the daemon's home (homes/),
// else the system's temporary folder, per user.
func (w *transport) ownHomeRoot() string {
	if w.o.DaemonHome != "" {
		return filepath.Join(w.o.DaemonHome, "homes")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("codesession-homes-%d", os.Getuid()))
}

// ownHome lays out the HOME of a CLI that lists HOME, for sessions whose
// HOME would be userHome: one per backend and user HOME, not per session,
// so the warm pool (keyed by HOME) still hands a booted process to the
// next session; the state it links to is shared by those sessions anyway.
// Each declared "~/" state entry (made first when it is a folder) and
// each sharedConfig entry that exists is linked in; what the CLI makes
// there itself stays there. It is idempotent and safe to run concurrently.
func (w *transport) ownHome(userHome string, stateDirs []string) (string, error) {
	sum := sha256.Sum256([]byte(userHome))
	root := w.ownHomeRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	// in a shared temporary folder, another user may have made it first
	if fi, err := os.Lstat(root); err != nil || !fi.IsDir() || !ownedByUs(fi) {
		return "", fmt.Errorf("%s is not a folder of this user's", root)
	}
	own := filepath.Join(root, w.id()+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(own, 0o700); err != nil {
		return "", err
	}
	link := func(rel string) error {
		from, to := filepath.Join(own, rel), filepath.Join(userHome, rel)
		if _, err := os.Lstat(from); err == nil {
			return nil // linked already, or the CLI's own
		}
		if err := os.MkdirAll(filepath.Dir(from), 0o700); err != nil {
			return err
		}
		if err := os.Symlink(to, from); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	for _, p := range stateDirs {
		rel, ok := strings.CutPrefix(p, "~/")
		if !ok {
			continue // an absolute state folder is writable where it is
		}
		if isFolder(rel) {
			// made in the user's HOME now: the link must not dangle, and
			// Landlock rules hold on what exists
			if err := os.MkdirAll(filepath.Join(userHome, rel), 0o700); err != nil {
				return "", err
			}
		}
		if err := link(rel); err != nil {
			return "", err
		}
	}
	for _, rel := range sharedConfig {
		if _, err := os.Stat(filepath.Join(userHome, rel)); err != nil {
			continue
		}
		if err := link(rel); err != nil {
			return "", err
		}
	}
	return own, nil
}

// ownedByUs reports whether fi belongs to this process's user.
func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

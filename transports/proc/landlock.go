package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Confinement is the Landlock domain of a command and everything it
// starts (children and setsid grandchildren inherit it; only the kernel
// can lift it). Writes: only under WritableDirs (plus the character
// devices every shell writes to and, with OwnTmp, a private TMPDIR).
// Reads: everywhere but under ReadDenied. Execution stays unrestricted.
type Confinement struct {
	WritableDirs []string
	// ReadDenied are paths (credential folders and files) nothing in the
	// tree may read or list. Landlock only allows, so the read rules are
	// the siblings of each denied path and of each of its parents
	// (ReadAllowSet); a path missing at start is not denied (nothing to
	// read), and an entry created later directly in a parent of a denied
	// path is not readable.
	ReadDenied []string
	// ReadableDirs are paths under a denied one that stay readable (a
	// session's own folders under the daemon's home, whose rest is denied).
	ReadableDirs []string
	// OwnTmp has Start make a private TMPDIR for the command (writable, set
	// as TMPDIR in its environment, removed at Release).
	OwnTmp bool
	// Network, when set, restricts TCP (Landlock ABI 4; nothing below it).
	Network *NetRules
}

// NetRules are the TCP ports the tree may connect to and bind. Landlock's
// rules are per port, not per address: an allowed port is open on every
// host. UDP (and so DNS) is not restricted, nor are Unix sockets.
// Multipath TCP, which Landlock does not see, is refused by a seccomp
// filter (amd64 and arm64; NoMPTCPHolds).
type NetRules struct {
	ConnectTCP []uint16
	BindTCP    []uint16
	// LoopbackOnly runs the tree in a network namespace of its own whose
	// only interface is its loopback, where the runtime relays each
	// Forward endpoint (host:port on the host's loopback) to the host
	// (netns.go); without the privilege for it, the port rules alone hold.
	LoopbackOnly bool
	Forward      []string
}

// NetABI is the first Landlock ABI with TCP port rules.
const NetABI = 4

// netRights are the network rights Landlock takes away outside the rules.
const netRights = landlock.AccessNetSet(llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP)

// writeRights are the filesystem rights Landlock takes away outside the
// writable directories: everything that creates, changes or removes a file.
const writeRights = landlock.AccessFSSet(llsys.AccessFSWriteFile | llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile |
	llsys.AccessFSMakeChar | llsys.AccessFSMakeDir | llsys.AccessFSMakeReg | llsys.AccessFSMakeSock |
	llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym | llsys.AccessFSRefer | llsys.AccessFSTruncate)

// readRights are the rights Landlock takes away under a denied path.
const readRights = landlock.AccessFSSet(llsys.AccessFSReadFile | llsys.AccessFSReadDir)

// fileRights are the rights that apply to a single (device) file.
const fileRights = landlock.AccessFSSet(llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSReadFile)

// devices every shell may write to.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"}

// ptys are the terminals a pty-running CLI opens (gemini's shell forkpty).
const ptys = "/dev/pts"

// writableDirs are the paths the write rules are built from: WritableDirs
// and extra, symlinks resolved, the missing ones left out.
func (c *Confinement) writableDirs(extra []string) []string {
	return realPaths(append(append([]string{}, c.WritableDirs...), extra...))
}

// Writable is every path a process started under c with the extra
// writable paths may write under: the list its Landlock write rules are
// built from, then the device files every shell writes to (those that
// exist). Start puts it on the Handle and the Group, and the session
// record shows it, so the record and the rules cannot drift.
func (c *Confinement) Writable(extra ...string) []string {
	out := c.writableDirs(extra)
	for _, d := range append(slices.Clone(devices), ptys) {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

type ruleset struct {
	fd    int
	flags uint32
	// noMPTCP: the ruleset restricts TCP, so multipath TCP sockets, which
	// Landlock does not see, are refused too (seccomp)
	noMPTCP bool
	// loopback: fork into a network namespace of its own, relaying forward
	loopback bool
	forward  []string
}

func (r *ruleset) close() { _ = syscall.Close(r.fd) }

// restrictThread puts the calling (locked) OS thread into the ruleset's
// domain, with no_new_privs, which Landlock requires of an unprivileged
// caller and which children inherit.
func (r *ruleset) restrictThread() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("proc: prctl(no_new_privs): %w", err)
	}
	if err := llsys.LandlockRestrictSelf(r.fd, r.flags); err != nil {
		return fmt.Errorf("proc: landlock_restrict_self: %w", err)
	}
	if r.noMPTCP {
		return refuseMPTCP()
	}
	return nil
}

// realPaths resolves symlinks (Landlock rules and the denied paths are
// about inodes, so /home/u and a symlink to it are one), dropping the
// paths that do not exist.
func realPaths(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		r, err := filepath.EvalSymlinks(abs)
		if err != nil || seen[r] {
			continue
		}
		seen[r] = true
		out = append(out, r)
	}
	return out
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// ReadAllowSet is the set of paths whose trees together hold everything
// but denied: starting from /, each allowed path that holds a denied one
// is replaced by its children, except the one on the way down, until the
// denied path itself is left out. denied must be absolute and clean.
func ReadAllowSet(denied []string) []string {
	allow := map[string]bool{"/": true}
	for _, d := range denied {
		for a := range allow {
			if !under(d, a) {
				continue
			}
			delete(allow, a)
			if a == d {
				break
			}
			// open a up: its children, and down toward d
			for cur := a; cur != d; {
				rest := strings.TrimPrefix(strings.TrimPrefix(d, cur), "/")
				next := filepath.Join(cur, strings.SplitN(rest, "/", 2)[0])
				entries, _ := os.ReadDir(cur)
				for _, e := range entries {
					if c := filepath.Join(cur, e.Name()); c != next && !underAny(c, denied) {
						allow[c] = true
					}
				}
				cur = next
			}
			break
		}
	}
	out := make([]string, 0, len(allow))
	for a := range allow {
		if !underAny(a, denied) {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// holdsAny reports whether dir holds (or is) one of paths.
func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if under(p, dir) {
			return true
		}
	}
	return false
}

// ruleset builds the Landlock ruleset (best effort: a kernel without
// Landlock gives nil and how == ""). extra are more writable directories.
func (c *Confinement) ruleset(extra []string) (*ruleset, string, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return nil, "", nil
	}
	denied := realPaths(c.ReadDenied)
	writable := c.writableDirs(extra)
	handled := writeRights
	if len(denied) > 0 {
		handled |= readRights
	}
	var rules []landlock.Rule
	for _, w := range writable {
		// a writable folder that holds a denied path gets no read right of
		// its own: its reads come from the read set, which leaves the
		// denied path out
		rights := writeRights | readRights
		if holdsAny(w, denied) {
			rights = writeRights
		}
		if fi, err := os.Stat(w); err == nil && !fi.IsDir() {
			rights &= fileRights
		}
		rules = append(rules, landlock.PathAccess(rights&handled, w))
	}
	if len(denied) > 0 {
		for _, a := range ReadAllowSet(denied) {
			fi, err := os.Stat(a)
			if err != nil {
				continue // a dangling link, or gone since
			}
			rights := readRights
			if !fi.IsDir() {
				rights = landlock.AccessFSSet(llsys.AccessFSReadFile)
			}
			rules = append(rules, landlock.PathAccess(rights, a).IgnoreIfMissing())
		}
	}
	rules = append(rules, landlock.PathAccess(fileRights&handled, devices...).IgnoreIfMissing(),
		landlock.PathAccess(fileRights&handled, ptys).IgnoreIfMissing())
	if len(denied) > 0 {
		for _, r := range realPaths(c.ReadableDirs) {
			rights := readRights
			if fi, err := os.Stat(r); err == nil && !fi.IsDir() {
				rights = landlock.AccessFSSet(llsys.AccessFSReadFile)
			}
			rules = append(rules, landlock.PathAccess(rights, r))
		}
	}
	var handledNet landlock.AccessNetSet
	if c.Network != nil && abi >= NetABI {
		handledNet = netRights
		for _, p := range c.Network.ConnectTCP {
			rules = append(rules, landlock.ConnectTCP(p))
		}
		for _, p := range c.Network.BindTCP {
			rules = append(rules, landlock.BindTCP(p))
		}
	}
	cfg := landlock.Config{HandledAccessFS: handled, HandledAccessNet: handledNet}.BestEffort()
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return nil, "", fmt.Errorf("proc: landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, "", nil
	}
	how := fmt.Sprintf("landlock ABI %d: writes only under %s", abi, strings.Join(writable, ", "))
	if len(denied) > 0 {
		how += "; no reads under " + strings.Join(denied, ", ")
	}
	if handledNet != 0 {
		how += fmt.Sprintf("; TCP connect only to ports %v, bind only %v", c.Network.ConnectTCP, c.Network.BindTCP)
		if NoMPTCPHolds() {
			how += ", no multipath TCP"
		}
	}
	rs := &ruleset{fd: fd, flags: flags, noMPTCP: handledNet != 0}
	if c.Network != nil && c.Network.LoopbackOnly {
		rs.loopback, rs.forward = true, slices.Clone(c.Network.Forward)
	}
	return rs, how, nil
}

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func LandlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// CredentialPaths are the credential folders and files of a home that no
// backend process may read: SSH, cloud, cluster and forge logins.
func CredentialPaths(home string) []string {
	if home == "" {
		return nil
	}
	var out []string
	for _, p := range []string{".ssh", ".aws", ".config/gcloud", ".kube", ".gnupg", ".netrc", ".docker/config.json",
		".config/gh", ".git-credentials", ".azure"} {
		out = append(out, filepath.Join(home, p))
	}
	return out
}

// WithWritable is a copy of c with more writable paths (nil stays nil:
// an unconfined session stays unconfined).
func (c *Confinement) WithWritable(paths ...string) *Confinement {
	if c == nil {
		return nil
	}
	out := *c
	out.WritableDirs = append(append([]string{}, c.WritableDirs...), paths...)
	return &out
}

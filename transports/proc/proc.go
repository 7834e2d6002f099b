package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
)

// watchdogScript is run by /bin/sh as the group leader. $1 is the session's
// cgroup directory ("" when there is none); the rest is the command. fd 3
// is the lifeline. The watcher ignores the signals an interrupt sends to the
// group, drops the command's stdio (so a reader of the command's stdout
// sees EOF when the command exits), and waits: a "release" line means the
// runtime let the process go on purpose; EOF means the runtime is gone, and
// the group and the cgroup die. The command gets neither the lifeline nor
// the watcher's traps.
const watchdogScript = `cg=$1; shift
( trap '' INT TERM HUP QUIT PIPE
  exec </dev/null >/dev/null 2>&1
  while read -r l <&3; do [ "$l" = release ] && exit 0; done
  [ -n "$cg" ] && echo 1 > "$cg/cgroup.kill"
  kill -9 0 ) &
exec "$@" 3<&-`

// Shell is the shell the watchdog runs in.
const Shell = "/bin/sh"

// Options say how Start contains a command.
type Options struct {
	// Confine, when set, restricts the command's writes (Landlock).
	Confine *Confinement
}

// Handle is a started, contained process. Pgid is its process group (the
// command's pid). Release it once cmd.Wait has returned.
type Handle struct {
	Pid, Pgid int
	group     *Group
	lifeline  *os.File
	record    string
	tmp       string // the private TMPDIR, removed at Release
	relay     *relay // a loopback-only tree's relay, closed at Release
	once      sync.Once
	// Confined says how the command's writes are restricted ("" when not).
	Confined string
	// Writable is every path the confined command's tree may write under
	// (Confinement.Writable: its private TMPDIR and cgroup included); nil
	// when it is not confined.
	Writable []string
}

// Start starts cmd contained: in its own process group under the watchdog,
// in the group's cgroup where there is one, recorded for the boot sweep,
// and confined when opts ask. cmd must not have been started, must not set
// ExtraFiles (fd 3 is the lifeline) and may set other SysProcAttr fields
// than Setpgid, Pgid and the cgroup ones, which Start owns. After Start,
// cmd.Path and cmd.Args are the watchdog's; the command's own argv follows
// them. Wait for cmd as usual, then call Release.
func (g *Group) Start(cmd *exec.Cmd, opts Options) (*Handle, error) {
	if cmd.Process != nil {
		return nil, errors.New("proc: the command was already started")
	}
	if len(cmd.ExtraFiles) > 0 {
		return nil, errors.New("proc: ExtraFiles are not supported (fd 3 is the watchdog's lifeline)")
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: lifeline: %w", err)
	}
	cgDir, cgFD := g.cgroupForStart()
	if cgFD != nil {
		defer cgFD.Close()
	}
	argv := append([]string{Shell, "-c", watchdogScript, "codesession-watchdog", cgDir, cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = Shell, argv
	cmd.ExtraFiles = []*os.File{r}
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid, attr.Pgid = true, 0
	if cgFD != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, int(cgFD.Fd())
	}
	cmd.SysProcAttr = attr

	h := &Handle{group: g, lifeline: w}
	var rules *ruleset
	if opts.Confine != nil {
		extra := []string{}
		if cgDir != "" {
			extra = append(extra, cgDir) // the watcher writes cgroup.kill
		}
		if opts.Confine.OwnTmp {
			tmp, err := os.MkdirTemp("", tmpPrefix)
			if err != nil {
				r.Close()
				w.Close()
				return nil, fmt.Errorf("proc: the process's TMPDIR: %w", err)
			}
			h.tmp = tmp
			extra = append(extra, tmp)
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, "TMPDIR="+tmp) // exec keeps the last value of a name
		}
		rs, how, err := opts.Confine.ruleset(extra)
		if err != nil {
			r.Close()
			w.Close()
			h.removeTmp()
			return nil, err
		}
		rules, h.Confined = rs, how
		if rs != nil {
			h.Writable = opts.Confine.Writable(extra...)
		}
	}
	if rules != nil {
		var fellBack string
		h.relay, fellBack, err = startConfined(cmd, rules)
		rules.close()
		switch {
		case h.relay != nil:
			h.Confined += fmt.Sprintf("; a network namespace with only loopback, relaying %v to the host", rules.forward)
		case fellBack != "":
			h.Confined += "; loopback fell back to the TCP port rules: " + fellBack
		}
	} else {
		err = cmd.Start()
	}
	r.Close() // the watcher holds its own copy
	if err != nil {
		w.Close()
		h.removeTmp()
		return nil, err
	}
	h.Pid, h.Pgid = cmd.Process.Pid, cmd.Process.Pid
	h.record = g.record(h.Pgid, argv, h.tmp)
	g.NoteWritable(h.Writable)
	return h, nil
}

// startConfined forks cmd from an OS thread restricted by rules (in a
// network namespace of its own first, when they ask for loopback only:
// then the relay, or why it fell back). The goroutine ends locked, so the
// runtime discards the thread.
func startConfined(cmd *exec.Cmd, rules *ruleset) (rel *relay, fellBack string, err error) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if rules.loopback {
			r, err := enterLoopbackNS(rules.forward)
			switch {
			case err == nil:
				rel = r
			case isNoNamespace(err):
				fellBack = err.Error()
			default:
				done <- fmt.Errorf("proc: loopback-only network: %w", err)
				return
			}
		}
		if err := rules.restrictThread(); err != nil {
			done <- err
			return
		}
		done <- cmd.Start()
	}()
	if err := <-done; err != nil {
		rel.close()
		return nil, "", err
	}
	return rel, fellBack, nil
}

// Signal sends sig to the process group.
func (h *Handle) Signal(sig syscall.Signal) error {
	return syscall.Kill(-h.Pgid, sig)
}

// Kill kills the process group at once, and the session's cgroup with it
// when killCgroup is set (which catches setsid escapes, but also every other
// process of the session).
func (h *Handle) Kill(killCgroup bool) {
	_ = syscall.Kill(-h.Pgid, syscall.SIGKILL)
	if killCgroup {
		h.group.killCgroup()
	}
}

// Release lets the watchdog go: it kills what is left of the process
// group (the command has exited; its background children have not), tells
// the watcher the runtime is done with it, and drops the record. Call it
// after cmd.Wait. It is idempotent.
func (h *Handle) Release() {
	h.once.Do(func() {
		_ = syscall.Kill(-h.Pgid, syscall.SIGKILL)
		_, _ = h.lifeline.Write([]byte("release\n")) // EPIPE when the watcher is gone
		_ = h.lifeline.Close()
		if h.record != "" {
			_ = os.Remove(h.record)
		}
		h.removeTmp()
		h.relay.close()
	})
}

// TempDir is the command's private TMPDIR ("" when it has none).
func (h *Handle) TempDir() string { return h.tmp }

func (h *Handle) removeTmp() {
	if h.tmp != "" {
		_ = os.RemoveAll(h.tmp)
	}
}

// Group is one session's processes. The zero value is not usable; make one
// with Kit.Group. A nil *Group starts processes with the watchdog and a
// process group only (no cgroup, no records).
type Group struct {
	kit       *Kit
	sessionID string

	mu      sync.Mutex
	cg      string // created cgroup dir
	cgErr   error
	cgTried bool
	closed  bool
	// writable is what the group's confined processes may write, in the
	// order first started (Handle.Writable, each path once)
	writable []string
}

// Kit is a runtime's process bookkeeping: where records live, which runtime
// owns them, and the cgroup root sessions get their cgroups under.
type Kit struct {
	// Dir holds the records (one file per live process group).
	Dir string
	// RuntimeID names the runtime that owns the records.
	RuntimeID string
	cgroups   Cgroups
}

// NewKit returns the bookkeeping of runtime runtimeID with records under
// dir (created) and cgroups from DetectCgroups, scoped by dir: runtimes
// with other homes (other daemons, parallel tests) live in other cgroup
// subtrees, so a sweep never touches them.
func NewKit(dir, runtimeID string) (*Kit, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proc: records: %w", err)
	}
	cg := DetectCgroups()
	if cg.Root != "" {
		abs, _ := filepath.Abs(dir)
		sum := sha256.Sum256([]byte(abs))
		cg.Root = filepath.Join(cg.Root, "home-"+hex.EncodeToString(sum[:6]))
	}
	return &Kit{Dir: dir, RuntimeID: runtimeID, cgroups: cg}, nil
}

// Sweep kills what runtimes of this kit's home that are no longer alive
// left (see the package function Sweep).
func (k *Kit) Sweep(alive func(runtimeID string) bool) (SweepReport, error) {
	rep, err := Sweep(k.Dir, k.cgroups.Root, alive)
	if k.cgroups.Root != "" {
		_ = os.Remove(k.cgroups.Root) // empty once nothing of this home runs
	}
	return rep, err
}

// Close removes the runtime's cgroup subtree (its sessions' cgroups are
// removed as they close; what is left is killed).
func (k *Kit) Close() {
	if k == nil || k.cgroups.Root == "" {
		return
	}
	rt := filepath.Join(k.cgroups.Root, safeName(k.RuntimeID))
	if subs, err := os.ReadDir(rt); err == nil {
		for _, s := range subs {
			if s.IsDir() {
				removeCgroup(filepath.Join(rt, s.Name()), 2*time.Second)
			}
		}
	}
	_ = os.Remove(rt)
	_ = os.Remove(k.cgroups.Root)
}

// Cgroups reports the cgroup support the kit found.
func (k *Kit) Cgroups() Cgroups {
	if k == nil {
		return Cgroups{Reason: "no process kit"}
	}
	return k.cgroups
}

// Group returns the process group bookkeeping of one session.
func (k *Kit) Group(sessionID string) *Group {
	return &Group{kit: k, sessionID: sessionID}
}

// Kit is the bookkeeping the group belongs to (nil for a nil Group), so a
// backend can start processes ahead of a session under a group of its own.
func (g *Group) Kit() *Kit {
	if g == nil {
		return nil
	}
	return g.kit
}

// cgroupForStart creates the session's cgroup on first use and opens it
// for CLONE_INTO_CGROUP; ("", nil) when there is none.
func (g *Group) cgroupForStart() (string, *os.File) {
	if g == nil || g.kit == nil || g.kit.cgroups.Root == "" {
		return "", nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.cgTried {
		g.cgTried = true
		dir := filepath.Join(g.kit.cgroups.Root, safeName(g.kit.RuntimeID), safeName(g.sessionID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			g.cgErr = err
		} else {
			g.cg = dir
		}
	}
	if g.cg == "" {
		return "", nil
	}
	f, err := os.Open(g.cg)
	if err != nil {
		return "", nil
	}
	return g.cg, f
}

// NoteWritable adds paths to what the group's processes may write: Start
// notes each confined process's Handle.Writable; a backend that hands a
// session a process started in another group (a warm pool's) notes that
// group's Writable.
func (g *Group) NoteWritable(paths []string) {
	if g == nil || len(paths) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range paths {
		if !slices.Contains(g.writable, p) {
			g.writable = append(g.writable, p)
		}
	}
}

// Writable is every path a confined process started in the group so far
// may write under (the union of their Handle.Writable); nil before the
// first one.
func (g *Group) Writable() []string {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.writable)
}

// Cgroup is the session's cgroup directory, "" when it has none.
func (g *Group) Cgroup() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cg
}

func (g *Group) killCgroup() {
	if cg := g.Cgroup(); cg != "" {
		_ = killCgroupDir(cg)
	}
}

// Close kills every process left in the session's cgroup and removes it.
func (g *Group) Close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	cg := g.cg
	g.closed = true
	g.mu.Unlock()
	if cg != "" {
		removeCgroup(cg, 5*time.Second)
	}
}

// Start with a nil Group still gets the watchdog and a process group.
var _ = (*Group)(nil)

func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || string(b) == "." || string(b) == ".." {
		return "_"
	}
	return string(b)
}

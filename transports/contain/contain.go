// Package contain is the runtime's containment of every backend, applied
// where backends are registered (Wrap, Registry) so no backend and no
// session actor has to remember it:
//
//   - the environment policy's start check (transports.EnvChecker), with
//     the variables the operator passed to that backend by name;
//   - each session's process bookkeeping (a proc.Group: its cgroup and the
//     boot-sweep records), handed to the backend in SessionSpec.Procs and
//     closed (cgroup killed and removed) when the session closes;
//   - the per-turn wall clock: a turn still open after its limit is
//     interrupted, and if it has not ended a grace period later the
//     runtime ends it itself (EvTurnEnd interrupted, with the reason); a
//     late turn end from the backend is then dropped, so the turn closes
//     exactly once;
//   - redaction: every event on its way to the session (and so to the
//     store, the live feed and the logs) has the values of the credentials
//     in the backend's environment and known key shapes replaced.
//
// A wrapped Session has every optional ability (Interrupter, Steerer,
// ModelSetter, PostureSetter); one the backend lacks answers unsupported,
// as the session actor would. Wrappers are safe for concurrent use; the
// sink is called under the session wrapper's lock, so backend events and
// the wall clock's own events keep one order.
package contain

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// DefaultGrace is how long an interrupted, over-time turn gets to end by
// itself before the runtime ends it.
const DefaultGrace = 30 * time.Second

// Options configure the containment of a runtime's backends.
type Options struct {
	// Kit is the runtime's process bookkeeping; nil: processes still run
	// under the watchdog, without cgroups or boot-sweep records.
	Kit *proc.Kit
	// PassEnv maps a backend id to the daemon variables passed to it by name.
	PassEnv map[string][]string
	// TurnTimeout maps a backend id to its per-turn wall clock; a backend
	// not in it gets DefaultTurnTimeout. 0 disables the clock.
	TurnTimeout        map[string]time.Duration
	DefaultTurnTimeout time.Duration
	// Grace is DefaultGrace when 0.
	Grace time.Duration
	// Environ is the daemon's environment (default os.Environ), whose
	// credential values are redacted from events.
	Environ func() []string
	// Unconfined turns the Landlock confinement of backends' processes off
	// (it is on by default, best effort by the kernel's ABI).
	Unconfined bool
	// ReadDenied are more paths no backend process may read (the daemon's
	// home and token); the credential folders of the daemon user's HOME and
	// of the session's HOME are always denied.
	ReadDenied []string
	// DaemonHome is the daemon's home ($CODESESSION_HOME: its token, the
	// store, every session's records). No backend process may read it but
	// for the session's own folders in it: its working directory (an
	// isolated worktree), its HOME, its provision folder.
	DaemonHome string
	// NetworkPorts are TCP ports a session with network confinement may
	// connect to besides its model endpoint's.
	NetworkPorts []uint16
}

// EnvNetwork, in a network-confined session's processes, names its mode
// and the TCP ports it may connect to ("model-only:[443 8080]").
const EnvNetwork = "CODESESSION_NETWORK"

// RuntimeShell is implemented by backends whose shell the runtime itself
// launches (native's bash), which proc confines with Landlock.
type RuntimeShell interface {
	ConfinesShell() bool
}

// Wrap contains t.
func Wrap(t transports.Transport, o Options) transports.Transport {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Environ == nil {
		o.Environ = os.Environ
	}
	return &transport{inner: t, o: o}
}

// Registry returns a registry holding every backend of r, contained.
func Registry(r *transports.Registry, o Options) *transports.Registry {
	out := transports.NewRegistry()
	for _, id := range r.IDs() {
		if t, err := r.Get(id); err == nil {
			out.Register(Wrap(t, o))
		}
	}
	return out
}

type transport struct {
	inner transports.Transport
	o     Options
}

var (
	_ transports.Transport  = (*transport)(nil)
	_ transports.EnvChecker = (*transport)(nil)
)

// Unwrap returns the contained backend.
func (w *transport) Unwrap() transports.Transport { return w.inner }

func (w *transport) id() string { return w.inner.Descriptor().ID }

func (w *transport) wall() time.Duration {
	if d, ok := w.o.TurnTimeout[w.id()]; ok {
		return d
	}
	return w.o.DefaultTurnTimeout
}

// Descriptor is the backend's, with how this host contains it.
func (w *transport) Descriptor() transports.Descriptor {
	d := w.inner.Descriptor()
	c := &messages.Containment{TurnWallClock: messages.Duration(w.wall())}
	reads := "no reads under ~/.ssh, ~/.aws, ~/.config/gcloud, ~/.kube, ~/.gnupg and the daemon's home and token"
	if d.Containment != nil {
		c.StateDirs, c.ListsHome = d.Containment.StateDirs, d.Containment.ListsHome // the backend's declaration
		if c.ListsHome {
			reads += "; the CLI lists HOME, so it runs in a HOME of its own (" + w.ownHomeRoot() + "/" + d.ID +
				"-…) holding links to its state and the user's git config, never to ~/.ssh"
		}
	}
	if _, runsProcs := w.inner.(transports.EnvChecker); runsProcs {
		c.Watchdog = true
		c.Env = "an allowlist (PATH, HOME, locale, TERM, the backend's documented variables, config env and --env); " +
			"founder credentials in the daemon's environment refuse a start unless named in backends." + d.ID + ".passEnv"
		cg := w.o.Kit.Cgroups()
		if cg.Root != "" {
			c.Cgroup = "one cgroup v2 per session under " + cg.Root + " (killed with cgroup.kill: setsid escapes die too)"
		} else {
			c.Cgroup = "none (" + cg.Reason + "): process groups only, so a setsid child escapes the watchdog"
		}
		switch abi := proc.LandlockABI(); {
		case w.o.Unconfined:
			c.Filesystem = "not confined: turned off for this runtime"
		case abi > 0:
			c.Filesystem = fmt.Sprintf("Landlock ABI %d on the whole process tree (children and setsid grandchildren): "+
				"writes only in the workspace, the session's HOME (when it has its own), a private TMPDIR and the CLI's state (%s); %s",
				abi, strings.Join(c.StateDirs, ", "), reads)
		default:
			c.Filesystem = "not confined: this kernel has no Landlock (best effort)"
		}
		c.Network = networkReport(w.o.Unconfined)
		switch rs, ok := w.inner.(RuntimeShell); {
		case ok && rs.ConfinesShell() && proc.LandlockABI() > 0:
			c.Shell = fmt.Sprintf("Landlock ABI %d: writes only in the workspace and the session's TMPDIR", proc.LandlockABI())
		case ok && rs.ConfinesShell():
			c.Shell = "not confined: this kernel has no Landlock (best effort)"
		default:
			c.Shell = "the backend runs its own shell, inside the process tree's confinement (filesystem)"
		}
	} else {
		c.Cgroup = "none: the backend runs no process"
		c.Env = "none: the backend runs in-process and reads no environment"
	}
	d.Containment = c
	if d.Gate == "" {
		d.Gate = messages.GateNone
	}
	return d
}

// confinement is the Landlock confinement of the session's processes:
// writes in the workspace, the session's own HOME, the backend's declared
// state folders and a private TMPDIR per process; no reads under the
// credential folders of either HOME or under ReadDenied.
//
// userHome is the HOME the session was given when it differs from the one
// its processes see (a CLI that lists HOME runs in a HOME of its own,
// ownHome): its credential folders are denied too.
func (w *transport) confinement(spec transports.SessionSpec, userHome string) *proc.Confinement {
	daemonHome, _ := os.UserHomeDir()
	sessionHome := sessionHome(spec)
	home := cmp.Or(sessionHome, daemonHome)
	c := &proc.Confinement{OwnTmp: true}
	if spec.Cwd != "" {
		c.WritableDirs = append(c.WritableDirs, spec.Cwd)
		// the agent's own git (add, commit) writes the repository's git
		// directory, which lies outside the working directory when that is
		// a subdirectory or a worktree (isolate: worktree)
		c.WritableDirs = append(c.WritableDirs, gitDirsOutside(spec.Cwd)...)
	}
	if sessionHome != "" {
		c.WritableDirs = append(c.WritableDirs, sessionHome) // the session's own
	}
	if p := spec.Provision; p != nil && p.Home != "" {
		// the HOME capability curation laid out for the session (droid's),
		// which its transport runs the process with
		c.WritableDirs = append(c.WritableDirs, p.Home)
	}
	if d := w.inner.Descriptor().Containment; d != nil {
		for _, p := range d.StateDirs {
			if rest, ok := strings.CutPrefix(p, "~/"); ok {
				p = filepath.Join(home, rest)
			}
			if isFolder(p) {
				// a folder: made now, because Landlock rules hold on what
				// exists, and a folder made later directly in a HOME that
				// holds a denied path would be unreadable
				_ = os.MkdirAll(p, 0o700)
			}
			c.WritableDirs = append(c.WritableDirs, p)
		}
	}
	c.ReadDenied = append(append(proc.CredentialPaths(daemonHome), proc.CredentialPaths(sessionHome)...), proc.CredentialPaths(userHome)...)
	c.ReadDenied = append(c.ReadDenied, w.o.ReadDenied...)
	if w.o.DaemonHome != "" {
		// the daemon's home is denied, the session's own folders in it
		// are not: its workspace and HOME (writable, so readable) and
		// its provision folder (MCP config, skills), read only
		c.ReadDenied = append(c.ReadDenied, w.o.DaemonHome)
		if spec.Provision != nil && spec.Provision.Dir != "" {
			c.ReadableDirs = append(c.ReadableDirs, spec.Provision.Dir)
		}
	}
	if mode := spec.Network; mode == messages.NetworkModelOnly || mode == messages.NetworkLoopback {
		c.Network = &proc.NetRules{ConnectTCP: w.allowedPorts(spec)}
		if mode == messages.NetworkLoopback {
			c.Network.LoopbackOnly, c.Network.Forward = true, w.loopbackEndpoints(spec)
		}
	}
	return c
}

// sessionHome is the HOME the session's processes will see: the
// session's, else one its environment sets (config env, --env; the last
// one wins, as in the process's env); "" for the daemon user's.
func sessionHome(spec transports.SessionSpec) string {
	home := spec.Home
	if home == "" {
		for _, kv := range spec.Env {
			if v, ok := strings.CutPrefix(kv, "HOME="); ok && v != "" {
				home = v
			}
		}
	}
	return home
}

// allowedPorts are the TCP ports a session with network confinement may
// connect to: its model endpoint's (the port of every *_BASE_URL variable
// of the session's or the daemon's environment; 443 when none names one,
// the CLIs' default https endpoint) and Options.NetworkPorts.
func (w *transport) allowedPorts(spec transports.SessionSpec) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	add := func(p uint16) {
		if p != 0 && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, kv := range append(append([]string{}, w.o.Environ()...), spec.Env...) {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasSuffix(name, "_BASE_URL") {
			continue
		}
		add(urlPort(val))
	}
	if len(out) == 0 {
		add(443)
	}
	for _, p := range w.o.NetworkPorts {
		add(p)
	}
	slices.Sort(out)
	return out
}

// baseURLs are the *_BASE_URL values of the daemon's and the session's
// environment (the session's last).
func (w *transport) baseURLs(spec transports.SessionSpec) []string {
	var out []string
	for _, kv := range append(append([]string{}, w.o.Environ()...), spec.Env...) {
		if name, val, ok := strings.Cut(kv, "="); ok && strings.HasSuffix(name, "_BASE_URL") {
			out = append(out, val)
		}
	}
	return out
}

// loopbackEndpoints are what a loopback session's namespace relays to
// the host: each model endpoint on the host's loopback (host:port) and
// each of Options.NetworkPorts on 127.0.0.1.
func (w *transport) loopbackEndpoints(spec transports.SessionSpec) []string {
	var out []string
	add := func(ep string) {
		if !slices.Contains(out, ep) {
			out = append(out, ep)
		}
	}
	for _, raw := range w.baseURLs(spec) {
		if host, port := urlHostPort(raw); port != 0 && isLoopbackHost(host) {
			add(net.JoinHostPort(host, strconv.Itoa(int(port))))
		}
	}
	for _, p := range w.o.NetworkPorts {
		add(net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p))))
	}
	return out
}

// remoteEndpoints are the model endpoints not on the host's loopback,
// which a loopback session cannot reach.
func (w *transport) remoteEndpoints(spec transports.SessionSpec) []string {
	var out []string
	for _, raw := range w.baseURLs(spec) {
		if host, port := urlHostPort(raw); port != 0 && !isLoopbackHost(host) {
			out = append(out, net.JoinHostPort(host, strconv.Itoa(int(port))))
		}
	}
	return out
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// urlHostPort is the host and TCP port of an http(s) URL (port 0 for
// anything else).
func urlHostPort(raw string) (string, uint16) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", 0
	}
	return u.Hostname(), urlPort(raw)
}

// urlPort is the TCP port of an http(s) URL, 0 for anything else.
func urlPort(raw string) uint16 {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return 0
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0
		}
		return uint16(n)
	}
	switch u.Scheme {
	case "https":
		return 443
	case "http":
		return 80
	}
	return 0
}

// networkReport is what backends says of network confinement on this host.
func networkReport(unconfined bool) string {
	switch abi := proc.LandlockABI(); {
	case unconfined:
		return "open: confinement is turned off for this runtime"
	case abi >= proc.NetABI:
		loopback := "loopback: the whole tree in a network namespace of its own with only its loopback, where the runtime " +
			"relays the model endpoint when it is on the host's loopback (and networkPorts on 127.0.0.1); nothing else is " +
			"reachable (no other host, no DNS, no UDP), Unix sockets with a path stay open, a remote model endpoint is unreachable"
		if ok, why := proc.LoopbackHolds(); !ok {
			loopback = "loopback: enforced as model-only on this host (" + why + ")"
		}
		return fmt.Sprintf("open by default (config network, backends.<id>.network, start's network, --network); "+
			"model-only: Landlock ABI %d TCP rules on the whole tree: connect only to the model endpoint's port(s) (its *_BASE_URL variables, "+
			"else 443) and networkPorts, no TCP listening, multipath TCP refused; per port, not per address "+
			"(an allowed port is open on every host); UDP (DNS) and Unix sockets stay open; %s", abi, loopback)
	default:
		return fmt.Sprintf("open: this kernel's Landlock (ABI %d) has no TCP rules (ABI %d), so network: model-only and loopback do not hold", abi, proc.NetABI)
	}
}

// applied is what the session's confinement is on this host, for its
// record: what held, and what was asked and did not.
//
// unreachable are model endpoints a loopback session cannot reach.
func applied(c *proc.Confinement, mode string, unreachable []string) *messages.Applied {
	a := &messages.Applied{LandlockABI: proc.LandlockABI(), Network: cmp.Or(mode, messages.NetworkOpen)}
	if c == nil {
		a.LandlockABI = 0
		a.BestEffort = append(a.BestEffort, "not confined: confinement is turned off for this runtime")
		return a
	}
	if a.LandlockABI == 0 {
		a.BestEffort = append(a.BestEffort, "not confined: this kernel has no Landlock")
		return a
	}
	// what the rules will be built from before any process started; the
	// session replaces it with what its processes' rules were built from
	// (session.fromBackend), which adds the folders a backend makes at
	// its start (codex's CODEX_HOME, an ACP agent's scratch folder), each
	// process's own TMPDIR and the session's cgroup
	a.Writable = c.Writable()
	if c.OwnTmp {
		a.Writable = append(a.Writable, filepath.Join(os.TempDir(), "codesession-tmp-*"))
	}
	a.ReadDenied, a.ReadAllowed = slices.Clone(c.ReadDenied), slices.Clone(c.ReadableDirs)
	if a.LandlockABI < 3 {
		a.BestEffort = append(a.BestEffort, fmt.Sprintf("Landlock ABI %d cannot deny truncating files outside the writable folders (ABI 3)", a.LandlockABI))
	}
	if c.Network != nil {
		switch {
		case a.LandlockABI < proc.NetABI:
			a.BestEffort = append(a.BestEffort, fmt.Sprintf("network %s not enforced: Landlock ABI %d has no TCP rules (ABI %d)", mode, a.LandlockABI, proc.NetABI))
		default:
			a.ConnectTCP = slices.Clone(c.Network.ConnectTCP)
			holds, why := proc.LoopbackHolds()
			switch {
			case mode == messages.NetworkLoopback && holds:
				a.Relayed = slices.Clone(c.Network.Forward)
				for _, ep := range unreachable {
					a.BestEffort = append(a.BestEffort, "the model endpoint "+ep+" is not on the host's loopback: unreachable from the session's namespace")
				}
				a.BestEffort = append(a.BestEffort, "Unix sockets with a path are not restricted")
			case mode == messages.NetworkLoopback:
				a.BestEffort = append(a.BestEffort, "loopback fell back to model-only (Landlock's TCP rules are per port, not per address): "+why,
					"UDP and Unix sockets are not restricted")
			default:
				a.BestEffort = append(a.BestEffort, "UDP and Unix sockets are not restricted")
			}
			if !proc.NoMPTCPHolds() {
				a.BestEffort = append(a.BestEffort, "multipath TCP is not refused on this architecture (Landlock does not see it)")
			}
		}
	}
	return a
}

// gitDirsOutside is the git directory of the repository around cwd and,
// for a linked worktree, the common directory it shares with the main
// checkout, where either lies outside cwd. It reads files only (.git, a
// worktree's "gitdir:" line, its commondir), never runs git, and answers
// nothing when cwd is in no repository.
func gitDirsOutside(cwd string) []string {
	inside := func(p string) bool {
		rel, err := filepath.Rel(cwd, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	for dir := filepath.Clean(cwd); ; dir = filepath.Dir(dir) {
		dotgit := filepath.Join(dir, ".git")
		fi, err := os.Lstat(dotgit)
		if err == nil {
			var dirs []string
			switch {
			case fi.IsDir():
				dirs = []string{dotgit}
			case fi.Mode().IsRegular():
				b, err := os.ReadFile(dotgit)
				gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
				if err != nil || !ok || len(b) > 4096 {
					return nil
				}
				gd = strings.TrimSpace(gd)
				if !filepath.IsAbs(gd) {
					gd = filepath.Join(dir, gd)
				}
				dirs = []string{filepath.Clean(gd)}
				if cb, err := os.ReadFile(filepath.Join(gd, "commondir")); err == nil && len(cb) < 4096 {
					common := strings.TrimSpace(string(cb))
					if !filepath.IsAbs(common) {
						common = filepath.Join(gd, common)
					}
					dirs = append(dirs, filepath.Clean(common))
				}
			}
			var out []string
			for _, d := range dirs {
				if !inside(d) {
					out = append(out, d)
				}
			}
			return out
		}
		if parent := filepath.Dir(dir); parent == dir {
			return nil
		}
	}
}

// Probe is the backend's.
func (w *transport) Probe(ctx context.Context) messages.Availability { return w.inner.Probe(ctx) }

// CheckEnv runs the backend's environment check with its passed variables.
func (w *transport) CheckEnv(spec transports.SessionSpec) error {
	c, ok := w.inner.(transports.EnvChecker)
	if !ok {
		return nil
	}
	spec.PassEnv = append(append([]string{}, spec.PassEnv...), w.o.PassEnv[w.id()]...)
	return c.CheckEnv(spec)
}

// Open opens the backend's session with the session's process group and
// the passed variables, behind the wall clock and redaction.
func (w *transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	if sink == nil {
		return nil, messages.FieldError(messages.OpStart, "sink", "required")
	}
	spec.PassEnv = append(append([]string{}, spec.PassEnv...), w.o.PassEnv[w.id()]...)
	if spec.Procs == nil && w.o.Kit != nil && spec.SessionID != "" {
		spec.Procs = w.o.Kit.Group(spec.SessionID)
	}
	if spec.Confine == nil && !w.o.Unconfined {
		userHome := ""
		if d := w.inner.Descriptor().Containment; d != nil && d.ListsHome {
			userHome = sessionHome(spec)
			if userHome == "" {
				userHome, _ = os.UserHomeDir()
			}
			own, err := w.ownHome(userHome, d.StateDirs)
			if err != nil {
				spec.Procs.Close()
				return nil, messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot lay out the CLI's own HOME")
			}
			spec.Home, spec.Env = own, append(slices.Clone(spec.Env), "HOME="+own) // the last HOME wins
		}
		spec.Confine = w.confinement(spec, userHome)
		if n := spec.Confine.Network; n != nil {
			// the mode is in the processes' environment, so a warm pool
			// (keyed by what the environment builder passes) never hands a
			// session a process booted under another network confinement
			spec.Env = append(slices.Clone(spec.Env), fmt.Sprintf("%s=%s:%v", EnvNetwork, spec.Network, n.ConnectTCP))
		}
	}
	var report *messages.Applied
	if _, runsProcs := w.inner.(transports.EnvChecker); runsProcs {
		var unreachable []string
		if spec.Network == messages.NetworkLoopback {
			unreachable = w.remoteEndpoints(spec)
		}
		report = applied(spec.Confine, spec.Network, unreachable)
	}
	s := &session{sink: sink, wall: w.wall(), grace: w.o.Grace, group: spec.Procs, applied: report,
		redact:  newRedactor(proc.Secrets(append(append([]string{}, w.o.Environ()...), spec.Env...))),
		clocked: map[int]bool{}}
	inner, err := w.inner.Open(ctx, spec, s.fromBackend)
	if err != nil {
		spec.Procs.Close()
		return nil, err
	}
	s.mu.Lock()
	s.inner = inner
	s.mu.Unlock()
	return s, nil
}

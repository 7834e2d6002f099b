package codex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli"
	"github.com/codesession/codesession/transports/gate"
	prockit "github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/subprocess"
	"github.com/codesession/codesession/transports/warmpool"
)

// The warm pool keeps `codex app-server` processes that have finished
// initialize (about 2 s of the ~2.4 s a start costs on this machine: the
// node launcher, the native binary's boot and the handshake) ready for the
// next start with the same key. thread/start stays on the start's path
// (about 0.1 to 0.3 s): it is the protocol's own way to give a thread its
// cwd, model, sandbox and approval policy, and Codex reads config.toml
// again for it, so an adopted process is set up exactly like a cold one.
//
// What cannot change after boot is the key: the binary, cwd, the process
// environment (hashed; HOME, the model server's URL and key, a CODEX_HOME
// the user named), the folder the session's CODEX_HOME goes in, and the
// runtime's process kit. Model, effort, posture and the appended system
// prompt are the adopting session's, applied at adoption: config.toml is
// rewritten for its spec (model, effort, sandbox, provider, trust), then
// thread/start carries cwd, model, sandbox, approval policy and developer
// instructions; the thread id it returns is the session's external id.
//
// A pooled process has a CODEX_HOME of its own (".warm-<hex>" beside
// where the adopting session's goes), never shared with a live session.
// Adoption renames it to the session's CODEX_HOME, the very folder a cold
// start would have made, so resume and `codex resume` find the thread
// where they always do; the old path stays a symlink for the running
// process until the session closes. A start whose CODEX_HOME exists
// already (a resume, or a spec.Home used before) boots its own process, as
// does one with ResumeExternalID. A CODEX_HOME the user named is used as
// is, by pooled processes as by cold ones, and is part of the key.
//
// Pooled processes are contained like sessions: each boots through proc
// under its own group of the runtime's kit (watchdog, cgroup, boot-sweep
// record); a discarded one is killed and its CODEX_HOME removed; DrainWarm
// (the runtime closing) does that to all of its kit's; an adopted one
// keeps its group until its session closes. A pooled process that died
// while idle is never handed out. A daemon killed outright leaves pooled
// CODEX_HOMEs behind (proc's boot sweep kills the processes); the first
// boot of a later pool in the same folder removes them (sweepWarmHomes).

// warmKey is what a pooled process must share with the start that adopts it.
type warmKey struct {
	kit      *prockit.Kit
	bin, cwd string
	env      string // a hash of the process environment
	homes    string // the folder of the adopter's CODEX_HOME, or the user's own CODEX_HOME
	own      bool   // homes is the user's CODEX_HOME
}

// warmProc is a booted, initialized app-server waiting for a start.
type warmProc struct {
	s    *Session
	home string // its own CODEX_HOME ("" when it is the user's)
}

func newWarmSlot() *warmpool.Slot[warmKey, *warmProc] {
	return warmpool.NewSlot((*warmProc).alive, (*warmProc).discard, func(k warmKey) *prockit.Kit { return k.kit })
}

// WarmIdle is how many pooled processes are ready for a start like spec
// (for tests and the benchmark).
func (t *Transport) WarmIdle(spec transports.SessionSpec) int {
	bin, err := t.Binary(spec.Env)
	key, _, _ := t.warmKey(spec, bin)
	return cli.Idle(t.Slot, key, err)
}

// warmKey is spec's key and the CODEX_HOME its session gets ("" for the
// user's own); ok is false when the start cannot adopt (its CODEX_HOME is
// there already, or it resumes a thread).
func (t *Transport) warmKey(spec transports.SessionSpec, bin string) (key warmKey, target string, ok bool) {
	home, own := t.codexHome(spec)
	env := t.environ(spec, "")
	if own {
		env = t.environ(spec, home)
	}
	key = warmKey{kit: spec.Procs.Kit(), bin: bin, cwd: spec.Cwd, env: warmpool.EnvKey(env), homes: home, own: own}
	if own {
		return key, "", spec.ResumeExternalID == ""
	}
	key.homes = filepath.Dir(home)
	_, err := os.Lstat(home)
	return key, home, spec.ResumeExternalID == "" && errors.Is(err, fs.ErrNotExist)
}

// adoptWarm hands the start a pooled process when one fits (cli.Adopt);
// ok is false when the start must boot its own. The refill waits for the
// session's first turn (Shell.RefillAfterFirstTurn): on two cores a boot
// beside that turn slows it down, which is what the pool is there to
// avoid. A start whose CODEX_HOME is there already never adopts nor
// refills.
func (t *Transport) adoptWarm(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, pr cli.Prepared) (*Session, func(), bool) {
	key, target, can := t.warmKey(spec, pr.Bin)
	if !can {
		return nil, func() {}, false
	}
	w, refill, ok := cli.Adopt(t.Slot, key, spec,
		func(ctx context.Context, kit *prockit.Kit, tmpl transports.SessionSpec) (*warmProc, error) {
			return t.bootWarm(ctx, key, kit, tmpl, pr.Bin)
		},
		func(w *warmProc) error { return w.adopt(ctx, spec, sink, target, pr.Workspace) }, (*warmProc).discard)
	if !ok {
		return nil, refill, false
	}
	return w.s, refill, true
}

// bootWarm starts and initializes an app-server for the pool, under a
// group of its own in kit and with a CODEX_HOME of its own (unless the
// user named one). Its session emits nothing until a start adopts it.
func (t *Transport) bootWarm(ctx context.Context, key warmKey, kit *prockit.Kit, spec transports.SessionSpec, bin string) (*warmProc, error) {
	g := cli.WarmGroup(kit)
	spec.Procs = g
	w := &warmProc{}
	codexHome := key.homes
	if _, done := t.swept.LoadOrStore(key.homes, true); !done && !key.own {
		sweepWarmHomes(key.homes, 2*t.Cfg.StartTimeout, time.Now())
	}
	if !key.own {
		w.home = filepath.Join(key.homes, ".warm-"+transports.RandomHex(6))
		codexHome = w.home
		if err := writeConfig(w.home, spec, t.Cfg.Env); err != nil {
			g.Close()
			_ = os.RemoveAll(w.home)
			return nil, err
		}
	}
	w.s = newSession(t, spec, func(int, messages.Event) {}, bin, codexHome, nil)
	w.s.freshHome, w.s.OwnGroup = w.home, g
	ctx, cancel := context.WithTimeout(ctx, t.Cfg.StartTimeout)
	defer cancel()
	p, err := w.s.boot(ctx)
	if err == nil && w.home != "" {
		err = os.WriteFile(filepath.Join(w.home, ownerFile), []byte(strconv.Itoa(p.Pgid)+"\n"), 0o600)
	}
	if err != nil {
		w.s.Discard()
		return nil, err
	}
	return w, nil
}

// ownerFile, in a pooled CODEX_HOME, holds the process group of the
// app-server booted with it: a later pool tells by it the homes a killed
// daemon's pool left (proc's boot sweep killed their processes) from the
// homes of live processes.
const ownerFile = ".codesession-warm-pgid"

// sweepWarmHomes removes what pools left under dir when their runtime
// died: pooled CODEX_HOMEs whose app-server's process group is gone, ones
// never given an owner (a boot that did not finish) older than grace, and
// adoption links whose first process is gone (later processes of the
// session use its CODEX_HOME's own path) or whose session's CODEX_HOME is
// gone. A home whose group still runs, or whose group id was reused, stays.
func sweepWarmHomes(dir string, grace time.Duration, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".warm-") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		link := e.Type()&fs.ModeSymlink != 0
		b, err := os.ReadFile(filepath.Join(path, ownerFile))
		if err != nil {
			if _, serr := os.Stat(path); link && errors.Is(serr, fs.ErrNotExist) {
				_ = os.Remove(path) // its session's CODEX_HOME was removed
			} else if fi, lerr := os.Lstat(path); !link && lerr == nil && now.Sub(fi.ModTime()) > grace {
				_ = os.RemoveAll(path)
			}
			continue
		}
		pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pgid <= 1 || groupRuns(pgid) {
			continue
		}
		if link {
			_ = os.Remove(path)
		} else {
			_ = os.RemoveAll(path)
		}
	}
}

// groupRuns: process group pgid has a process (ours or not).
func groupRuns(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// writeConfig makes the CODEX_HOME home and writes spec's config.toml in it.
func writeConfig(home string, spec transports.SessionSpec, env []string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return messages.Wrap(messages.CodeInvalid, messages.OpStart, err, "cannot create the session's CODEX_HOME "+home)
	}
	baseURL := subprocess.EnvValue(append(append([]string(nil), env...), spec.Env...), EnvBaseURL)
	cfg := configTOML(spec, baseURL)
	if p := spec.Provision; p != nil && p.ConfigFile != "" {
		// the capability plan's [mcp_servers.*] tables (actors/curation)
		extra, err := os.ReadFile(p.ConfigFile)
		if err != nil {
			return messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot read the session's provisioned MCP servers")
		}
		cfg += "\n# provisioned capabilities: " + p.ConfigFile + "\n" + string(extra)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		return messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot write the session's codex config.toml")
	}
	if p := spec.Provision; p != nil && p.SkillsDir != "" {
		// the plan's skills, where codex finds them: $CODEX_HOME/skills
		link := filepath.Join(home, "skills")
		_ = os.Remove(link)
		if err := os.Symlink(p.SkillsDir, link); err != nil {
			return messages.Wrap(messages.CodeInternal, messages.OpStart, err, "cannot link the session's provisioned skills")
		}
	}
	return nil
}

// alive: the process has not exited and nobody closed it.
func (w *warmProc) alive() bool { return w.s.Alive() }

// discard kills the process and its group and removes its CODEX_HOME.
func (w *warmProc) discard() { w.s.Discard() }

// adopt makes the pooled process the session of spec: its CODEX_HOME
// becomes target (renamed, with the old path left as a link for the
// running process) with spec's config.toml, the core is spec's, and
// thread/start opens spec's thread; then EvStarted goes to sink. On error
// the process is left for the caller to discard.
func (w *warmProc) adopt(ctx context.Context, spec transports.SessionSpec, sink transports.Sink, target string, ws *gate.Workspace) error {
	s := w.s
	s.Lock()
	p := s.Proc
	if s.Closed() || p == nil || p.Status != "" || s.Core.Dead {
		s.Unlock()
		return errors.New("the warm codex app-server ended")
	}
	if w.home != "" {
		if err := os.Rename(w.home, target); err != nil {
			s.Unlock()
			return fmt.Errorf("cannot move the warm CODEX_HOME: %w", err)
		}
		s.freshHome = target // until the thread exists: a failed adoption leaves nothing
		if err := os.Symlink(target, w.home); err != nil {
			s.Unlock()
			return fmt.Errorf("cannot link the warm CODEX_HOME: %w", err)
		}
		s.oldHome = w.home
		s.HostEnv = []string{"CODEX_HOME=" + target} // for the processes after this one
	}
	// the session's record says what the adopted process may write (its
	// rules were built in the pool's group). No path needs renaming: the
	// rules name the folder the CODEX_HOMEs are made in (confineHome),
	// which holds the pooled one and target alike, never the pooled one
	spec.Procs.NoteWritable(s.Spec.Procs.Writable())
	s.posture, s.model, s.effort, s.sendPost = spec.Posture, "", effortMap[spec.Effort], false
	s.Adopted(spec, sink, newSessionCore(s.t, spec, ws))
	s.Unlock()
	if w.home != "" {
		if err := writeConfig(target, spec, s.t.Cfg.Env); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.t.Cfg.StartTimeout)
	defer cancel()
	if err := s.openThread(ctx, p); err != nil {
		return err
	}
	s.Begin()
	return nil
}

package actors

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/proc"
)

// containBackends builds the runtime's process kit (records under
// <home>/run/procs, a cgroup per session where the host allows), sweeps
// what dead runtimes of this home left running, and wraps every backend in
// the runtime's containment (transports/contain): environment check with
// each backend's passEnv, the per-turn wall clock, redaction, Landlock
// (no reads of the daemon's home but the session's own folders in it, the
// configured network ports).
func containBackends(cfg config.Config, runtimeID string, backends *transports.Registry, alive func(string) bool, log *slog.Logger) (*transports.Registry, *proc.Kit) {
	kit, err := proc.NewKit(filepath.Join(cfg.Home, "run", "procs"), runtimeID)
	if err != nil {
		log.Warn("no process records: the boot sweep cannot find what a killed runtime left (its watchdogs still kill it)", "err", err)
		kit = nil
	} else {
		rep, err := kit.Sweep(alive)
		if err != nil {
			log.Warn("process sweep failed", "err", err)
		}
		for _, r := range rep.Killed {
			log.Info("killed the process group a dead runtime left", "runtime", r.Runtime, "session", r.SessionID, "pgid", r.Pgid, "argv", r.Argv)
		}
		if len(rep.Removed) > 0 {
			log.Info("removed the temporary folders dead runtimes left", "folders", len(rep.Removed))
		}
		if cg := kit.Cgroups(); cg.Root == "" {
			log.Debug("no cgroup per session", "reason", cg.Reason)
		}
	}
	o := contain.Options{Kit: kit, DefaultTurnTimeout: cfg.TurnTimeout.D(),
		PassEnv: map[string][]string{}, TurnTimeout: map[string]time.Duration{}, DaemonHome: cfg.Home}
	for _, p := range cfg.NetworkPorts {
		o.NetworkPorts = append(o.NetworkPorts, uint16(p)) // 1..65535: config validates
	}
	for id, b := range cfg.Backends {
		o.PassEnv[id] = b.PassEnv
		if b.TurnTimeout != nil {
			o.TurnTimeout[id] = b.TurnTimeout.D()
		}
	}
	return contain.Registry(backends, o), kit
}

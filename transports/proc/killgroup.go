package proc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
)

// Kill kills, at once, every process group this runtime recorded for the
// session (each only while it is provably the recorded one, as Sweep checks)
// and the session's cgroup, and returns how many groups it killed. It is for
// a session whose backend would not close in time: nothing the backend
// started outlives the session it was abandoned with. The records stay for
// the handles' own Release (or the next boot sweep).
func (g *Group) Kill() int {
	if g == nil || g.kit == nil {
		return 0
	}
	g.killCgroup()
	if g.kit.Dir == "" {
		return 0
	}
	ents, err := os.ReadDir(g.kit.Dir)
	if err != nil {
		return 0
	}
	prefix := safeName(g.kit.RuntimeID) + "."
	var procs []procfs.ProcStat
	loaded, n := false, 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(g.kit.Dir, e.Name()))
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(b, &rec) != nil || rec.Pgid <= 1 || rec.Runtime != g.kit.RuntimeID || rec.SessionID != g.sessionID {
			continue
		}
		if !loaded {
			procs, loaded = allStats(), true
		}
		if ours, _ := groupIsOurs(rec, procs); ours {
			_ = syscall.Kill(-rec.Pgid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

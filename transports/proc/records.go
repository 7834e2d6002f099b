package proc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Record is what the kit keeps of one live process group, so a runtime
// that starts after this one died can kill what it left.
type Record struct {
	Runtime   string   `json:"runtime"`
	SessionID string   `json:"sessionId,omitempty"`
	Pgid      int      `json:"pgid"`
	StartTime uint64   `json:"startTime"` // the leader's start, in clock ticks after boot (/proc/<pid>/stat)
	Cgroup    string   `json:"cgroup,omitempty"`
	Argv      []string `json:"argv"`
	// Tmp is a temporary folder the runtime made: the group's own TMPDIR
	// (Confinement.OwnTmp, removed at Release) or, in a record with no
	// Pgid, a session's (Group.TempDir). A runtime that dies leaves it
	// behind: the sweep removes it.
	Tmp string `json:"tmp,omitempty"`
}

// record writes the record of a started group; "" when there is no kit or
// the write failed (the watchdog still holds).
func (g *Group) record(pgid int, argv []string, tmp string) string {
	if g == nil || g.kit == nil || g.kit.Dir == "" {
		return ""
	}
	st, err := startTime(pgid)
	if err != nil {
		return "" // the process is already gone
	}
	rec := Record{Runtime: g.kit.RuntimeID, SessionID: g.sessionID, Pgid: pgid, StartTime: st, Cgroup: g.Cgroup(), Argv: argv[5:], Tmp: tmp}
	return writeRecord(filepath.Join(g.kit.Dir, fmt.Sprintf("%s.%d.json", safeName(g.kit.RuntimeID), pgid)), rec)
}

// writeRecord writes rec whole at path (by rename) and returns path; ""
// when the write failed.
func writeRecord(path string, rec Record) string {
	b, _ := json.Marshal(rec)
	part := path + ".tmp"
	if os.WriteFile(part, b, 0o600) != nil || os.Rename(part, path) != nil {
		_ = os.Remove(part)
		return ""
	}
	return path
}

// TempDir makes a private TMPDIR for the session (a backend's own
// scratch, shared by its commands) and records it beside the process
// records, so that when the runtime dies without removing it the next
// boot's Sweep does. remove deletes the folder and then its record (the
// record stays when the folder could not be removed whole); call it when
// the session ends. Without a kit the folder is made all the same,
// unrecorded.
func (g *Group) TempDir() (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", tmpPrefix)
	if err != nil {
		return "", nil, err
	}
	rec := "" // unrecorded (no kit, a failed write): only a crash would leave it
	if g != nil && g.kit != nil && g.kit.Dir != "" {
		rec = writeRecord(filepath.Join(g.kit.Dir, fmt.Sprintf("%s.%s.json", safeName(g.kit.RuntimeID), filepath.Base(dir))),
			Record{Runtime: g.kit.RuntimeID, SessionID: g.sessionID, Tmp: dir})
	}
	return dir, func() {
		if os.RemoveAll(dir) != nil {
			return // the record stays: a later call, or the next boot's sweep, removes the rest
		}
		if rec != "" {
			_ = os.Remove(rec)
		}
	}, nil
}

func startTime(pid int) (uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.Starttime, nil
}

// SweepReport says what Sweep did.
type SweepReport struct {
	Killed  []Record // groups (and cgroups) of dead runtimes that were killed
	Skipped []string // why records were dropped without a kill (a reused pid, nothing left)
	Removed []string // temporary folders of dead runtimes that were removed (a group's own, a session's TempDir)
}

// Sweep kills the process groups and cgroups that runtimes which are no
// longer alive left behind, as recorded under dir, and removes their
// temporary folders and then their records (a record whose folder could
// not be removed stays, for the next sweep). A group is killed only while
// it is provably the recorded one: its leader is alive with the recorded
// start time, or the leader is gone
// and members of the group remain that started after it (a pgid is never
// handed out again while any process still has it). alive reports whether
// a runtime still runs; its records are left alone.
func Sweep(dir string, cgroupRoot string, alive func(runtimeID string) bool) (SweepReport, error) {
	var rep SweepReport
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return rep, nil
		}
		return rep, err
	}
	var procs []procfs.ProcStat
	loaded := false
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(b, &rec) != nil || rec.Pgid <= 1 && !(rec.Pgid == 0 && ownTmp(rec.Tmp)) {
			rep.Skipped = append(rep.Skipped, e.Name()+": unreadable record")
			_ = os.Remove(path)
			continue
		}
		if alive(rec.Runtime) {
			continue
		}
		if rec.Pgid == 0 {
			// a session's TMPDIR (Group.TempDir): no process to kill
			if removeTmp(rec.Tmp, &rep) {
				_ = os.Remove(path)
			}
			continue
		}
		if !loaded {
			procs, loaded = allStats(), true
		}
		if ours, why := groupIsOurs(rec, procs); ours {
			_ = syscall.Kill(-rec.Pgid, syscall.SIGKILL)
			rep.Killed = append(rep.Killed, rec)
		} else {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("group %d: %s", rec.Pgid, why))
		}
		if rec.Cgroup != "" {
			removeCgroup(rec.Cgroup, 2*time.Second)
		}
		if ownTmp(rec.Tmp) && !removeTmp(rec.Tmp, &rep) {
			// the record stays: the next sweep finds nothing of the
			// group left and tries the folder again
			continue
		}
		_ = os.Remove(path)
	}
	if cgroupRoot != "" {
		sweepCgroups(cgroupRoot, alive)
	}
	return rep, nil
}

// removeAll is os.RemoveAll (tests: a disk that refuses).
var removeAll = os.RemoveAll

// removeTmp removes a dead runtime's recorded TMPDIR and says so in rep;
// false when it could not be removed whole (its record then stays, for the
// next sweep).
func removeTmp(dir string, rep *SweepReport) bool {
	if err := removeAll(dir); err != nil {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: not removed (%v); the next sweep tries again", dir, err))
		return false
	}
	rep.Removed = append(rep.Removed, dir)
	return true
}

// tmpPrefix names the temporary folders the kit makes (Start's for
// Confinement.OwnTmp, Group.TempDir's).
const tmpPrefix = "codesession-tmp-"

// ownTmp says whether a record's Tmp is one the kit made, which the sweep
// may remove: an absolute path named as the kit names them. A record is
// ours (the kit's folder is private), but a sweep never removes a folder
// it did not make on a record's word alone.
func ownTmp(path string) bool {
	return path != "" && filepath.IsAbs(path) && filepath.Clean(path) == path &&
		strings.HasPrefix(filepath.Base(path), tmpPrefix) && len(filepath.Base(path)) > len(tmpPrefix)
}

func allStats() []procfs.ProcStat {
	ps, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	out := make([]procfs.ProcStat, 0, len(ps))
	for _, p := range ps {
		if st, err := p.Stat(); err == nil && st.State != "Z" && st.State != "X" {
			out = append(out, st) // a zombie runs nothing and cannot be killed
		}
	}
	return out
}

// groupIsOurs decides whether the live processes with the recorded pgid
// are the recorded group.
func groupIsOurs(rec Record, procs []procfs.ProcStat) (bool, string) {
	members := 0
	for _, st := range procs {
		if st.PID == rec.Pgid {
			if st.Starttime != rec.StartTime {
				return false, "the pid was reused (another start time)"
			}
			return true, ""
		}
		if st.PGRP == rec.Pgid && st.Starttime >= rec.StartTime {
			members++
		}
	}
	if members == 0 {
		return false, "nothing of it is left"
	}
	return true, ""
}

// sweepCgroups kills and removes the runtime cgroups under root whose
// runtime is not alive (<root>/<runtime>/<session>).
func sweepCgroups(root string, alive func(string) bool) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || alive(e.Name()) {
			continue
		}
		rt := filepath.Join(root, e.Name())
		subs, _ := os.ReadDir(rt)
		for _, s := range subs {
			if s.IsDir() {
				removeCgroup(filepath.Join(rt, s.Name()), 2*time.Second)
			}
		}
		_ = os.Remove(rt)
	}
}

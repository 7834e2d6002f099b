package proc

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cgroups is the cgroup v2 support a kit found: Root is a writable
// directory in a cgroup v2 hierarchy with cgroup.kill that sessions get
// their cgroups under; Reason says why there is none.
type Cgroups struct {
	Root   string `json:"root,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EnvCgroupRoot overrides where session cgroups go ("off" disables them).
const EnvCgroupRoot = "CODESESSION_CGROUP_ROOT"

// DetectCgroups finds a cgroup v2 mount (the unified hierarchy, also on
// hybrid hosts such as /sys/fs/cgroup/unified), takes this process's own
// cgroup in it and tries to make <it>/codesession there. It does not mount
// anything. A host without a writable cgroup2 (no delegation, not root) has
// none: sessions then rely on process groups alone, and setsid escapes are
// caught only by the watchdog's group kill, which they left.
func DetectCgroups() Cgroups {
	if v := os.Getenv(EnvCgroupRoot); v != "" {
		if v == "off" {
			return Cgroups{Reason: EnvCgroupRoot + "=off"}
		}
		return tryRoot(v)
	}
	mount := cgroup2Mount()
	if mount == "" {
		return Cgroups{Reason: "no cgroup v2 hierarchy is mounted"}
	}
	own := ownCgroup()
	return tryRoot(filepath.Join(mount, own, "codesession"))
}

func tryRoot(root string) Cgroups {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Cgroups{Reason: "cgroup v2 is not writable here: " + err.Error()}
	}
	probe, err := os.MkdirTemp(root, "probe-")
	if err != nil {
		return Cgroups{Reason: "cgroup v2 is not writable here: " + err.Error()}
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		return Cgroups{Reason: "this kernel's cgroup v2 has no cgroup.kill (Linux 5.14+)"}
	}
	return Cgroups{Root: root}
}

func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mountpoint ... - fstype source opts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if fs := strings.Fields(post); len(fs) > 0 && fs[0] == "cgroup2" {
			if f := strings.Fields(pre); len(f) >= 5 {
				return f[4]
			}
		}
	}
	return ""
}

func ownCgroup() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return filepath.Clean("/" + p)
		}
	}
	return "/"
}

func killCgroupDir(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
}

// removeCgroup kills everything in dir and removes it, waiting up to wait
// for the processes to be gone (rmdir fails while any remains).
func removeCgroup(dir string, wait time.Duration) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	_ = killCgroupDir(dir)
	deadline := time.Now().Add(wait)
	for {
		if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

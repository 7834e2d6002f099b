package proctest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Environs reads /proc/<pid>/environ of every live process of every
// process group the kit's records under dir list (the watchdog, the agent
// CLI and whatever it started in its group), keyed by pid. A process
// that exits while being read is left out.
func Environs(t testing.TB, dir string) map[int][]string {
	t.Helper()
	out := map[int][]string{}
	for _, r := range Records(t, dir) {
		for _, pid := range InGroup(r.Pgid) {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err != nil {
				continue
			}
			out[pid] = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
	}
	return out
}

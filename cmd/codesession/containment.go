package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// writeContainment prints how this host contains each backend: the gate,
// the watchdog, the cgroup, the shell's confinement, the wall clock and the
// environment policy, each a fact or the reason it does not hold.
func writeContainment(w io.Writer, res messages.ListBackendsResult) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Containment (how this host contains each backend):")
	for _, b := range res.Backends {
		d := b.Descriptor
		gate := map[messages.GateScope]string{
			messages.GateTools:     "every file tool opens its path through the workspace gate",
			messages.GateQuestions: "every file-tool permission question passes the workspace gate before anyone is asked",
			messages.GateNone:      "none",
		}[d.Gate]
		fmt.Fprintf(w, "  %s: gate: %s\n", d.ID, orDash(gate))
		c := d.Containment
		if c == nil {
			fmt.Fprintln(w, "    (not reported)")
			continue
		}
		clock := "none"
		if c.TurnWallClock > 0 {
			clock = time.Duration(c.TurnWallClock).String() + " per turn (interrupted, then ended by the runtime)"
		}
		fmt.Fprintf(w, "    watchdog: %s; cgroup: %s\n", yesNo(c.Watchdog), c.Cgroup)
		if c.Shell != "" {
			fmt.Fprintf(w, "    shell: %s\n", c.Shell)
		}
		fmt.Fprintf(w, "    wall clock: %s\n    environment: %s\n", clock, c.Env)
		if c.Filesystem != "" {
			fmt.Fprintf(w, "    filesystem: %s\n", c.Filesystem)
		}
		if c.Network != "" {
			fmt.Fprintf(w, "    network: %s\n", c.Network)
		}
	}
}

// networkHelp is the help of --network (run and start).
const networkHelp = "the session's network confinement: open (default); model-only: the agent's whole process tree may " +
	"open TCP connections only to the model endpoint's port(s) (its *_BASE_URL variables, else 443) and the config's " +
	"networkPorts, on any address, and listen on none (Landlock ABI 4); loopback: the same, in a network namespace of " +
	"the session's own with only loopback, where the model endpoint on the host's loopback is relayed (a remote one is " +
	"unreachable; without root, as model-only); 'codesession backends' and the session record say what held"

// addNetworkFlag is --network of run and start.
func addNetworkFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "network", "", networkHelp)
}

// checkNetwork refuses a --network value that is not a mode.
func checkNetwork(cmd, v string) error {
	if !messages.ValidNetwork(v) {
		return usagef(cmd, "--network: want %s, %s or %s, got %q", messages.NetworkOpen, messages.NetworkModelOnly, messages.NetworkLoopback, v)
	}
	return nil
}

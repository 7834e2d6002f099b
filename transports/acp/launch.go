package acp

import (
	"os"
	"slices"

	"github.com/codesession/codesession/transports"
)

// The launch argv (the runtime's launch manifest records it): what a
// session's process starts with is known before the process starts, from
// the agent's Launch, so the manifest never waits on (or races) the
// process record the kit writes once the process runs.

// LaunchArgv is the argv (binary first) session spec.SessionID's process
// started with: the one its Open recorded (a warm process adopted by the
// session included, whose argv is the pooled boot's) while the session is
// open, else the argv a process for spec would start with (Launch run
// against a throwaway scratch directory); nil when Launch refuses spec.
func (t *Transport) LaunchArgv(spec transports.SessionSpec) []string {
	if spec.SessionID != "" {
		if v, ok := t.launched.Load(spec.SessionID); ok {
			return slices.Clone(v.([]string))
		}
	}
	bin, err := t.Binary(spec.Env)
	if err != nil {
		bin = t.agent.Command
	}
	scratch, err := os.MkdirTemp("", "codesession-"+t.agent.Descriptor.ID+"-argv-")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(scratch) // Launch may write its per-session files there
	args, _, err := t.agent.Launch(spec, scratch)
	if err != nil {
		return nil
	}
	return append([]string{bin}, args...)
}

// launchedAs remembers the argv of session id's process (Open, once it
// has the session) until the session closes.
func (t *Transport) launchedAs(id string, s *session) {
	if id != "" && len(s.argv) > 0 {
		t.launched.Store(id, slices.Clone(s.argv))
	}
}

func (t *Transport) forgetLaunched(id string) {
	if id != "" {
		t.launched.Delete(id)
	}
}

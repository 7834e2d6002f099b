package acp

import (
	"errors"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// TestProfileAgent: a profile's Agent carries the shared ACP descriptor
// and what the profile says: the process model from the command, the
// install hint and CLIVersion from the pin, plan to the plan mode and every
// other posture to the work mode (prefixed), an effort refused for an
// agent without efforts and passed to Launch for one with them.
func TestProfileAgent(t *testing.T) {
	launched := 0
	p := Profile{ID: "x", DisplayName: "X", Command: "xcli", Invocation: "--acp", Package: "@x/cli", Version: "1.2.3",
		PlanMode: "plan", WorkMode: "build", ModePrefix: "m#",
		Launch: func(transports.SessionSpec, string) ([]string, []string, error) {
			launched++
			return []string{"--acp"}, nil, nil
		}}
	a := p.Agent()
	d := a.Descriptor
	if d.ProcessModel != "one persistent `xcli --acp` process per session" || a.Install != "npm install @x/cli@1.2.3" || d.CLIVersion != "1.2.3" {
		t.Errorf("process model %q, install %q, version %q", d.ProcessModel, a.Install, d.CLIVersion)
	}
	if a.Modes[messages.PosturePlan] != "m#plan" || a.Modes[messages.PostureFull] != "m#build" || d.PostureMap[messages.PostureDefault] != "mode build, asks" {
		t.Errorf("modes %v, posture map %v", a.Modes, d.PostureMap)
	}
	if d.EffortSupport != messages.EffortNone || d.HonorsAllowed || d.Cost != messages.CostMetered || len(d.EditToolNames) == 0 || d.ExternalAttach != nil {
		t.Errorf("descriptor %+v", d)
	}
	if v := a.ParseVersion("xcli v1.2.3\n"); v != "1.2.3" {
		t.Errorf("ParseVersion = %q", v)
	}
	_, _, err := a.Launch(transports.SessionSpec{Effort: messages.EffortHigh}, "")
	var me *messages.Error
	if !errors.As(err, &me) || me.Code != messages.CodeUnsupported || launched != 0 {
		t.Errorf("an effort without efforts: %v (launched %d): want unsupported before Launch", err, launched)
	}
	p.Efforts = map[messages.Effort]string{messages.EffortHigh: "high"}
	if _, _, err := p.Agent().Launch(transports.SessionSpec{Effort: messages.EffortHigh}, ""); err != nil || launched != 1 {
		t.Errorf("an effort with efforts: %v (launched %d): want Launch to take it", err, launched)
	}
	if d := p.Agent().Descriptor; d.EffortSupport != messages.EffortAtStart || d.EffortMap[messages.EffortHigh] != "high" {
		t.Errorf("effort support %q, map %v", d.EffortSupport, d.EffortMap)
	}
}

package grok

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/transporttest"
)

// TestConformance runs the conformance suite against the fake grok (the
// CLI cannot be installed here; see fake_test.go): it proves the
// transport's handling of the documented shapes, not the CLI.
func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) transports.Transport {
			tr, _ := fakeGrokTransport(t, nil, WithLineCap(transporttest.LineCap))
			return tr
		},
		Prepare: prepareConformance,
	})
}

func prepareConformance(t *testing.T, c *transporttest.Case) transporttest.Setup {
	var rules []fakeRule
	for _, tn := range c.Turns {
		r := fakeRule{Match: tn.Input}
		for _, a := range tn.Actions {
			switch a.Kind {
			case transporttest.ActReply:
				r.Reply = strings.TrimSpace(r.Reply + "\n" + a.Text)
			case transporttest.ActWrite:
				if a.Gated {
					t.Skip("grok -p has no approval channel: a gated write is cancelled, never asked (seed 003)")
				}
				r.Write = &struct {
					Path    string `json:"path"`
					Content string `json:"content"`
				}{filepath.Join(c.Workspace, filepath.FromSlash(a.Path)), a.Content}
			case transporttest.ActSlow:
				if a.Duration < transporttest.LongSlow {
					t.Skip("grok shows no text before its process exits, so a turn cannot be steered")
				}
				t.Skip("grok shows no text before its process exits, which the interrupt case waits for; TestInterrupt covers it")
			case transporttest.ActBigOutput:
				t.Skip("grok reports no tool output")
			}
		}
		rules = append(rules, r)
	}
	tr, log := fakeGrokTransport(t, rules, WithLineCap(transporttest.LineCap))
	home := t.TempDir()
	setup := transporttest.Setup{
		Transport: tr,
		Spec:      transports.SessionSpec{Home: home},
		AgentSaw: func(substr string) bool {
			b, err := os.ReadFile(log)
			return err == nil && strings.Contains(string(b), jsonEscape(substr))
		},
	}
	if c.Fault != transporttest.FaultNone {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		setup.Transport = transporttest.CLI{Name: "grok", Bin: exe, New: func(bin string, _ int) transports.Transport {
			tr, _ := fakeGrokTransport(t, rules, WithLineCap(transporttest.LineCap), WithBinary(bin))
			return tr
		}}.Fault(t, c, 0)
	}
	return setup
}

// jsonEscape is how substr appears inside the JSON argv log.
func jsonEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return r.Replace(s)
}

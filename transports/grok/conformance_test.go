package grok

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/transporttest"
)

const conformanceLineCap = 256 << 10

// TestConformance runs the conformance suite against the fake grok (the
// CLI cannot be installed here; see fake_test.go): it proves the
// transport's handling of the documented shapes, not the CLI.
func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) transports.Transport {
			tr, _ := fakeGrokTransport(t, nil, WithLineCap(conformanceLineCap))
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
	tr, log := fakeGrokTransport(t, rules, WithLineCap(conformanceLineCap))
	home := t.TempDir()
	setup := transporttest.Setup{
		Transport: tr,
		Spec:      transports.SessionSpec{Home: home},
		AgentSaw: func(substr string) bool {
			b, err := os.ReadFile(log)
			return err == nil && strings.Contains(string(b), jsonEscape(substr))
		},
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(script string) transports.Transport {
		path := filepath.Join(t.TempDir(), "grok")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		tr, _ := fakeGrokTransport(t, rules, WithLineCap(conformanceLineCap), WithBinary(path))
		return tr
	}
	switch c.Fault {
	case transporttest.FaultNone:
	case transporttest.FaultBinaryMissing:
		setup.Transport = New(WithBinary(filepath.Join(t.TempDir(), "no-such-grok")))
	case transporttest.FaultImmediateExit:
		setup.Transport = wrap("echo 'fake grok: exiting at once' >&2\nexit 3\n")
	case transporttest.FaultGarbageStdout:
		setup.Transport = wrap(fmt.Sprintf("echo 'this line is not grok json'\nexec %q \"$@\"\n", exe))
	case transporttest.FaultLongLine:
		setup.Transport = wrap(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\necho\nexec %q \"$@\"\n", 1<<20, exe))
	default:
		t.Fatalf("unknown fault %v", c.Fault)
	}
	_ = time.Second
	return setup
}

// jsonEscape is how substr appears inside the JSON argv log.
func jsonEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return r.Replace(s)
}

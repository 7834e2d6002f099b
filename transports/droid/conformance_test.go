package droid

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/droid/droidtest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

const (
	conformanceOutputCap = 16 << 10
	bigOutputCap         = 1 << 10
)

// TestConformance runs the transport conformance suite against the real
// droid CLI, its model scripted by modelmock (Chat Completions) from each
// case's turns: a write is a Create, a big output a Read. For each gated
// write one more rule answers the follow-up carrying a deny reason with
// the rest of the turn. The noise cases run the fake droid of
// fake_test.go behind the noise: what they test is the transport's
// reading, and each real droid start costs the package run time it cannot
// spare on a loaded machine.
func TestConformance(t *testing.T) {
	transporttest.RunCLI(t, transporttest.CLI{
		Name: "droid",
		Bin:  droidBinary(t),
		New: func(bin string, outputCap int) transports.Transport {
			return New(WithBinary(bin), WithOutputCap(outputCap), WithLineCap(transporttest.LineCap))
		},
		Spec: func(t testing.TB, mock *modelmock.Server) transports.SessionSpec {
			return transports.SessionSpec{Home: droidtest.Home(t, mock.URL()), Model: mockModelID}
		},
		Acts: transporttest.Acts{
			Write: func(s *transporttest.Steps, path string, a transporttest.Action) {
				s.Call(transporttest.Call("Create", map[string]any{"file_path": path, "content": a.Content}))
			},
			// droid asks before any command at autonomy off, so the
			// slowness is the model's: a read-only LS, then a response held
			// back for the duration (droid.interrupt_session aborts it)
			Slow: func(s *transporttest.Steps, c *transporttest.Case, a transporttest.Action) {
				s.Text(a.Text)
				s.Call(transporttest.Call("LS", map[string]any{"directory_path": c.Workspace}))
				s.Open(modelmock.Step{Delay: modelmock.Duration(a.Duration)})
			},
			Read: func(s *transporttest.Steps, path string) {
				s.Call(transporttest.Call("Read", map[string]any{"file_path": path}))
			},
		},
		Rules:     denialRules,
		OutputCap: conformanceOutputCap,
		// droid cuts a tool's output itself (a command's to about 3 KB):
		// the cap must sit below what reaches the transport
		BigOutputCap: bigOutputCap,
		Exec:         fakeDroidCommand(t),
		Timeout:      2 * time.Minute,
	})
}

// fakeDroidCommand is a shell command running the fake droid.
func fakeDroidCommand(t testing.TB) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("env %s=1 %q", envFakeDroid, exe)
}

// denialRules answer the follow-up of each gated write's deny ("The user
// denied your Create call (<path>") with the steps after the write.
func denialRules(c *transporttest.Case, tn transporttest.Turn, steps []modelmock.Step) []modelmock.Rule {
	var creates []int
	for i, st := range steps {
		if st.Tool != nil && st.Tool.Name == "Create" {
			creates = append(creates, i)
		}
	}
	var rules []modelmock.Rule
	for _, a := range tn.Actions {
		if a.Kind != transporttest.ActWrite {
			continue
		}
		at := creates[0]
		creates = creates[1:]
		if !a.Gated {
			continue
		}
		rest := steps[at+1:]
		if len(rest) == 0 {
			rest = []modelmock.Step{{Text: "Understood."}}
		}
		path := filepath.Join(c.Workspace, filepath.FromSlash(a.Path))
		rules = append(rules, modelmock.Rule{Match: modelmock.Match{Text: "The user denied your Create call (" + path}, Steps: rest})
	}
	return rules
}

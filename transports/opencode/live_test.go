package opencode

import (
	"cmp"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLivePosture: plan sets opencode's "mode" option to plan and refuses
// a write; full sets it to build and the write runs unasked; default asks,
// and a deny's reason reaches the model with the next prompt.
func TestLivePosture(t *testing.T) {
	acptest.PostureRun(t, backend(t), `"value":"plan"`, `"value":"build"`)
}

// TestLiveEditsSessionCwd: seed 003 saw `opencode run` edit the parent
// checkout instead of the session's directory. A session in a
// subdirectory of a git checkout, whose model writes a relative path,
// must write it in the session's directory and nowhere else.
func TestLiveEditsSessionCwd(t *testing.T) {
	subprocesstest.Git(t)
	parent := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", parent).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	ws := filepath.Join(parent, "session")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	b := backend(t)
	call := acptest.Call("write", map[string]any{"filePath": "cwd-proof.txt", "content": "in the session cwd\n"})
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "write cwd-proof"},
		Steps: []modelmock.Step{{Tool: &call}, {Text: "written"}}}}}
	l := acptest.OpenLive(t, b, sc, ws, messages.PostureFull)
	l.Turn(1, "write cwd-proof", nil)
	l.RequireFile("cwd-proof.txt", "in the session cwd\n")
	if _, err := os.Stat(filepath.Join(parent, "cwd-proof.txt")); err == nil {
		t.Error("opencode wrote cwd-proof.txt in the parent checkout")
	}
}

// TestLiveEffort: a session started with an effort sends it in the model
// request (Chat Completions reasoning_effort); one started without sends
// none.
func TestLiveEffort(t *testing.T) {
	for _, c := range []struct {
		effort messages.Effort
		want   string
	}{{messages.EffortHigh, `"reasoning_effort":"high"`}, {messages.EffortMax, `"reasoning_effort":"xhigh"`}, {"", ""}} {
		t.Run(cmp.Or(string(c.effort), "none"), func(t *testing.T) {
			body := acptest.EffortRequest(t, backend(t), c.effort)
			if c.want == "" && strings.Contains(body, "reasoning_effort") {
				t.Errorf("a session without effort sent one: %.600s", body)
			}
			if c.want != "" && !strings.Contains(body, c.want) {
				t.Errorf("the model request carries no %s: %.600s", c.want, body)
			}
		})
	}
}

func TestWithEffort(t *testing.T) {
	raw, err := WithEffort(json.RawMessage(`{"agent":{"build":{"temperature":0.2,"options":{"x":1}}}}`), messages.EffortMedium)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Agent map[string]struct {
			Temperature float64        `json:"temperature"`
			Options     map[string]any `json:"options"`
		} `json:"agent"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"build", "plan", "general", "explore"} {
		if cfg.Agent[a].Options["reasoningEffort"] != "medium" {
			t.Errorf("agent %s: %+v: want reasoningEffort medium", a, cfg.Agent[a])
		}
	}
	if cfg.Agent["build"].Temperature != 0.2 || cfg.Agent["build"].Options["x"] != 1.0 {
		t.Errorf("the caller's build agent was not kept: %+v", cfg.Agent["build"])
	}
	if same, err := WithEffort(json.RawMessage(`{"a":1}`), ""); err != nil || string(same) != `{"a":1}` {
		t.Errorf("no effort changed the config: %s, %v", same, err)
	}
	var me *messages.Error
	if _, err := WithEffort(json.RawMessage(`{}`), "extreme"); !errors.As(err, &me) || me.Field != "effort" {
		t.Errorf("an unknown effort: %v", err)
	}
	if d := Agent().Descriptor; d.EffortSupport != messages.EffortAtStart || d.EffortMap[messages.EffortMax] != "xhigh" {
		t.Errorf("descriptor effort: %s %v", d.EffortSupport, d.EffortMap)
	}
}

func TestConfig(t *testing.T) {
	raw, err := Config(json.RawMessage(`{"provider":{"p":{}},"permission":{"edit":"allow"}}`), "p/m")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Provider   map[string]any    `json:"provider"`
		Permission map[string]string `json:"permission"`
		Model      string            `json:"model"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Provider["p"] == nil || cfg.Model != "p/m" || cfg.Permission["edit"] != "ask" || cfg.Permission["bash"] != "ask" {
		t.Errorf("config %s: want the caller's provider, the model, and edit and bash set to ask", raw)
	}
	if _, err := Config(json.RawMessage(`[1]`), ""); err == nil {
		t.Error("a config that is not an object was accepted")
	}
	if _, err := Config(nil, "no-provider"); err == nil {
		t.Error("a model without a provider was accepted")
	}
}

// TestConfigSkillPaths: the plan's skill directories go into skills.paths,
// after the caller's own.
func TestConfigSkillPaths(t *testing.T) {
	raw, err := Config(json.RawMessage(`{"skills":{"paths":["/mine"],"urls":["u"]}}`), "", "/plan/skills")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Skills struct {
			Paths []string `json:"paths"`
			URLs  []string `json:"urls"`
		} `json:"skills"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Skills.Paths, ",") != "/mine,/plan/skills" || len(cfg.Skills.URLs) != 1 {
		t.Errorf("config %s: want the caller's skills and the plan's path after them", raw)
	}
}

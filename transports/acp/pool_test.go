package acp

import (
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
)

// TestWarmKeyCoversWhatMakesProcessesDifferent: the pool key changes with
// everything fixed at a process's launch (kit, cwd, HOME, model, effort,
// allowed tools, environment, binary) and not with what adoption applies (posture) or
// what belongs to the start (session id, its own process group).
func TestWarmKeyCoversWhatMakesProcessesDifferent(t *testing.T) {
	kit, err := prockit.NewKit(t.TempDir(), "rt-key")
	if err != nil {
		t.Fatal(err)
	}
	other, err := prockit.NewKit(t.TempDir(), "rt-key-2")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Agent{Descriptor: messages.Descriptor{ID: "keyed"}}, WithEnv("FROM_TRANSPORT=1"))
	base := transports.SessionSpec{SessionID: "a", Cwd: "/w", Home: "/h", Model: "m", Posture: messages.PostureDefault,
		Env: []string{"K=v"}, Procs: kit.Group("a")}
	key := func(f func(*transports.SessionSpec)) warmKey {
		s := base
		s.Env = append([]string(nil), base.Env...)
		f(&s)
		return tr.warmKey(s, "/bin/agent")
	}
	k0 := key(func(*transports.SessionSpec) {})
	same := map[string]func(*transports.SessionSpec){
		"posture":    func(s *transports.SessionSpec) { s.Posture = messages.PosturePlan },
		"session id": func(s *transports.SessionSpec) { s.SessionID = "b" },
		"own group":  func(s *transports.SessionSpec) { s.Procs = kit.Group("b") },
	}
	for name, f := range same {
		if key(f) != k0 {
			t.Errorf("%s changed the key: a pooled process serves any %s", name, name)
		}
	}
	differ := map[string]func(*transports.SessionSpec){
		"kit":     func(s *transports.SessionSpec) { s.Procs = other.Group("a") },
		"no kit":  func(s *transports.SessionSpec) { s.Procs = nil },
		"cwd":     func(s *transports.SessionSpec) { s.Cwd = "/w2" },
		"home":    func(s *transports.SessionSpec) { s.Home = "/h2" },
		"model":   func(s *transports.SessionSpec) { s.Model = "m2" },
		"effort":  func(s *transports.SessionSpec) { s.Effort = messages.EffortHigh },
		"env":     func(s *transports.SessionSpec) { s.Env[0] = "K=w" },
		"env+":    func(s *transports.SessionSpec) { s.Env = append(s.Env, "L=1") },
		"passEnv": func(s *transports.SessionSpec) { s.PassEnv = []string{"X"} },
		"prompt":  func(s *transports.SessionSpec) { s.AppendSystemPrompt = "p" },
		"tools":   func(s *transports.SessionSpec) { s.AllowedTools = []string{"Read"} },
		"no tool": func(s *transports.SessionSpec) { s.AllowedTools = []string{} },
	}
	for name, f := range differ {
		if key(f) == k0 {
			t.Errorf("a different %s left the key unchanged: two processes that are not interchangeable would share a pool", name)
		}
	}
	if tr.warmKey(base, "/bin/other") == k0 {
		t.Error("a different binary left the key unchanged")
	}
	// only what the environment builder passes on makes processes differ:
	// an allowlisted variable does, any other daemon variable never reaches
	// the agent
	t.Setenv("FROM_DAEMON", "1")
	if key(func(*transports.SessionSpec) {}) != k0 {
		t.Error("a daemon variable the agent never sees changed the key")
	}
	t.Setenv("TZ", "Pacific/Apia")
	if key(func(*transports.SessionSpec) {}) == k0 {
		t.Error("a change in the daemon's environment that the agent sees left the key unchanged")
	}
}

// TestNoPoolNoRefill: without a pool (size 0, the default) Open neither
// adopts nor schedules a refill.
func TestNoPoolNoRefill(t *testing.T) {
	for _, tr := range []*Transport{New(Agent{}), New(Agent{}, WithWarmPool(0))} {
		s, refill, ok := tr.adoptWarm(t.Context(), transports.SessionSpec{Cwd: "/w"}, func(int, messages.Event) {}, "/bin/agent")
		if s != nil || refill != nil || ok {
			t.Errorf("size %d: adoptWarm = %v, %v, %v: want nothing", tr.WarmPool(), s, refill != nil, ok)
		}
	}
}

// TestLearnModelsFromEitherShape: the models an agent can be switched to
// come from its select config option of category "model" (opencode's
// shape) or, without one, from its session model state (gemini's); an
// agent with neither offers none, and the empty model is never offered.
func TestLearnModelsFromEitherShape(t *testing.T) {
	model, mode := acpsdk.SessionConfigOptionCategoryModel, acpsdk.SessionConfigOptionCategoryMode
	sel := func(id string, cat *acpsdk.SessionConfigOptionCategory, values ...string) acpsdk.SessionConfigOption {
		var opts acpsdk.SessionConfigSelectOptionsUngrouped
		for _, v := range values {
			opts = append(opts, acpsdk.SessionConfigSelectOption{Value: acpsdk.SessionConfigValueId(v), Name: v})
		}
		return acpsdk.SessionConfigOption{Select: &acpsdk.SessionConfigOptionSelect{Id: acpsdk.SessionConfigId(id), Category: cat,
			Options: acpsdk.SessionConfigSelectOptions{Ungrouped: &opts}}}
	}
	state := &acpsdk.SessionModelState{AvailableModels: []acpsdk.ModelInfo{{ModelId: "g-pro"}, {ModelId: "g-flash"}}, CurrentModelId: "g-pro"}

	var s session
	s.learnModels(state, []acpsdk.SessionConfigOption{sel("mode", &mode, "build", "plan"), sel("model", &model, "p/a", "p/b")})
	assert.Equal(t, acpsdk.SessionConfigId("model"), s.modelOption, "the config option wins over the model state")
	assert.True(t, s.offersModel("p/b"))
	assert.False(t, s.offersModel("g-flash"))
	assert.False(t, s.offersModel("plan"), "a mode is not a model")

	s = session{}
	s.learnModels(state, []acpsdk.SessionConfigOption{sel("mode", &mode, "build")})
	assert.Empty(t, s.modelOption)
	assert.True(t, s.offersModel("g-flash"), "session/set_model's models")
	assert.False(t, s.offersModel(""))

	s = session{}
	s.learnModels(nil, nil)
	assert.False(t, s.offersModel("g-flash"), "an agent without either offers no switch")
}

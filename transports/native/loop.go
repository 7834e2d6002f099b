package native

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// The loop with tools of the caller's own (a driver, whose only tool is
// the op tool): the same agent loop, provider, retries and events as a
// native session, but the model is offered exactly LoopSpec.Tools, every
// call of one of them runs (the caller's tool is its own boundary: no
// posture gate, no clarification), and the system prompt is the caller's.
// There is no workspace and no shell.

// Tool is one tool of the caller's, offered to the model as given.
type Tool struct {
	Spec ToolSpec
	// Run answers one call; its output goes back to the model (capped
	// like any tool output), marked as an error when isError.
	Run func(ctx context.Context, input json.RawMessage) (output string, isError bool)
}

// LoopSpec is what OpenLoop runs: the backend environment (Env, for the
// endpoint and keys, as SessionSpec.Env), the model (or a class) and
// effort, the whole system prompt, the tools and the per-turn round cap
// (0: the transport's).
type LoopSpec struct {
	Env       []string
	Model     string
	Effort    messages.Effort
	System    string
	Tools     []Tool
	MaxRounds int
}

// OpenLoop starts a loop with the caller's tools. Its session is driven as
// any native session (StartTurn, Interrupt, Close); Answer and SetPosture
// are unused, since its tools never ask.
func (t *Transport) OpenLoop(ctx context.Context, spec LoopSpec, sink transports.Sink) (transports.Session, error) {
	if sink == nil {
		return nil, messages.FieldError(messages.OpStart, "sink", "required")
	}
	if len(spec.Tools) == 0 {
		return nil, messages.FieldError(messages.OpStart, "tools", "a loop needs at least one tool")
	}
	if spec.Effort != "" && !spec.Effort.Valid() {
		return nil, messages.FieldError(messages.OpStart, "effort", "unknown effort %q", spec.Effort)
	}
	ext := make(map[string]Tool, len(spec.Tools))
	for _, tl := range spec.Tools {
		if tl.Spec.Name == "" || tl.Run == nil {
			return nil, messages.FieldError(messages.OpStart, "tools", "a tool needs a name and a Run")
		}
		if _, dup := ext[tl.Spec.Name]; dup {
			return nil, messages.FieldError(messages.OpStart, "tools", "tool %q is given twice", tl.Spec.Name)
		}
		ext[tl.Spec.Name] = tl
	}
	get := t.envLookup(spec.Env)
	httpc := sessionHTTPClient()
	prov, err := newProvider(get, httpc)
	if err != nil {
		return nil, err
	}
	model := spec.Model
	model = providerModel(prov.name(), model)
	if model == "" {
		model = get(EnvModel)
	}
	if model == "" {
		model = defaultModels[prov.name()]
	}
	maxRounds := t.maxRounds
	if spec.MaxRounds > 0 {
		maxRounds = spec.MaxRounds
	}
	s := newSession(sessionConfig{
		prov: prov, httpc: httpc, sink: sink,
		externalID: "native-loop-" + transports.RandomHex(8),
		model:      model, effort: spec.Effort, system: strings.TrimSpace(spec.System) + "\n",
		maxRounds: maxRounds, maxTokens: t.maxTokens, retry: t.retry, prices: t.prices,
		tools:    toolEnv{outputCap: t.outputCap},
		external: ext,
	}, messages.PostureFull)
	go s.run()
	return s, nil
}

// offeredExternal lists the caller's tools in the order given.
func (s *session) offeredExternal() []ToolSpec {
	out := make([]ToolSpec, 0, len(s.cfg.external))
	for _, tl := range s.cfg.externalOrder() {
		out = append(out, tl.Spec)
	}
	return out
}

// externalOrder is the caller's tools sorted by name (a map has no order,
// and the model must see the same list every round).
func (c *sessionConfig) externalOrder() []Tool {
	names := make([]string, 0, len(c.external))
	for n := range c.external {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Tool, len(names))
	for i, n := range names {
		out[i] = c.external[n]
	}
	return out
}

// callExternal runs one call of the caller's tools: an unknown name is
// refused back to the model; a known one runs.
func (s *session) callExternal(tr *turnRun, u block, input json.RawMessage, result func(toolResult) block) (block, outcome) {
	tl, ok := s.cfg.external[u.name]
	if !ok {
		names := make([]string, 0, len(s.cfg.external))
		for _, t := range s.cfg.externalOrder() {
			names = append(names, t.Spec.Name)
		}
		return result(errResult("refused: there is no tool %q (the tools are %s)", u.name, strings.Join(names, ", "))), outInvalid
	}
	out, isErr := tl.Run(tr.req.ctx, input)
	if o, cancelled := s.cancelled(tr.req.ctx); cancelled {
		if o == outStopped {
			return block{kind: blockToolResult, id: u.id, isError: true, text: "interrupted: the session was closed"}, o
		}
		return result(toolResult{output: out, isError: isErr}), o
	}
	return result(toolResult{output: out, isError: isErr}), outInvalid
}

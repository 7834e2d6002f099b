package script

import (
	"context"
	"path/filepath"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/subprocess"
)

// ID is the backend id of the scripted transport.
const ID = "script"

// Version is what Probe reports.
const Version = "script/1"

// EnvScenario is the SessionSpec.Env variable that picks a session's
// scenario: a path to a JSON scenario file (relative paths are read against
// the session's Cwd), or "builtin:demo" for DemoScenario, or
// "builtin:echo" for the built-in echo scenario.
const EnvScenario = "CODESESSION_SCRIPT"

// DefaultOutputCap is the default cap on a tool result's output.
const DefaultOutputCap = 64 << 10

// Transport is the scripted backend. It is safe for concurrent use; each
// Open starts an independent session.
type Transport struct {
	scenario   *Scenario
	delayScale float64
	outputCap  int
}

var _ transports.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithScenario sets the scenario of sessions whose Env names none. A nil
// scenario keeps the built-in echo scenario. The scenario must not be
// changed afterwards; an invalid one makes Open fail.
func WithScenario(sc *Scenario) Option { return func(t *Transport) { t.scenario = sc } }

// WithDelayScale multiplies every delay step: 0 skips delays (benchmarks),
// 1 (the default) waits as scripted. A negative factor counts as 0.
func WithDelayScale(f float64) Option {
	return func(t *Transport) { t.delayScale = max(f, 0) }
}

// WithOutputCap caps tool outputs at n bytes (default DefaultOutputCap);
// a cut output is reported with Truncated and OriginalBytes. n < 1 keeps
// the default.
func WithOutputCap(n int) Option {
	return func(t *Transport) {
		if n > 0 {
			t.outputCap = n
		}
	}
}

// New returns the scripted transport.
func New(opts ...Option) *Transport {
	t := &Transport{delayScale: 1, outputCap: DefaultOutputCap}
	for _, o := range opts {
		o(t)
	}
	return t
}

// EchoScenario returns the built-in scenario of a transport without one: it
// answers every turn with a short text echoing the input.
func EchoScenario() *Scenario {
	return &Scenario{Turns: []Turn{}, Fallback: &Turn{Steps: []Step{Text("Scripted reply to turn {{turn}}: {{input}}")}}}
}

// Descriptor returns the scripted backend's capability descriptor. It is
// labelled as scripted everywhere: Scripted, the display name and the
// briefing notes.
func (t *Transport) Descriptor() transports.Descriptor {
	return transports.Descriptor{
		ID:             ID,
		DisplayName:    "script (scripted test backend)",
		Scripted:       true,
		ProcessModel:   "in-process scripted agent",
		Protocol:       "scenario file",
		Granularity:    messages.GranularityStream,
		ClarifySupport: true,
		HonorsAllowed:  true,
		Resume:         messages.ResumeNative,
		ModelSelection: messages.ModelPerTurn,
		EffortSupport:  messages.EffortPerTurn,
		EffortMap: map[messages.Effort]string{
			messages.EffortLow: "low", messages.EffortMedium: "medium",
			messages.EffortHigh: "high", messages.EffortMax: "max",
		},
		ModelClassMap: map[string]string{
			"cheap": "script-cheap", "standard": "script-standard", "frontier": "script-frontier",
		},
		PostureMap: map[messages.Posture]string{
			messages.PosturePlan: "plan", messages.PostureDefault: "default",
			messages.PostureAcceptEdits: "acceptEdits", messages.PostureFull: "full",
		},
		EditToolNames: []string{"Write", "Edit"},
		Live: messages.LiveControls{
			Interrupt:  true,
			SetPosture: true,
			GuideModes: []messages.GuideMode{messages.GuideSteer, messages.GuideQueue, messages.GuideInterrupt},
		},
		Cost:       messages.CostFree,
		Strengths:  []string{"deterministic", "instant", "free"},
		Weaknesses: []string{"replays a fixed scenario; it does not read or understand the task"},
		BriefingNotes: "Scripted test backend: it replays a scenario (turns of text, tool calls, file " +
			"writes and edits, permission asks, failures) and never calls a model. Its answers depend on " +
			"your input only through the scenario's substring matches. Use it for tests, demos and " +
			"benchmarks, never for real work.",
		CLIVersion: Version,
	}
}

// Probe reports the scripted backend as always available.
func (t *Transport) Probe(ctx context.Context) messages.Availability {
	return messages.Availability{Available: true, Version: Version, CheckedAt: time.Now()}
}

// Open starts a scripted session. The scenario is the one named by
// EnvScenario in spec.Env, else the transport's, else EchoScenario. Open
// returns a *messages.Error with code invalid for a bad spec or scenario.
//
// EvStarted (ExternalSessionID "script-<hex>", or spec.ResumeExternalID when
// resuming; Model spec.Model) is emitted with turn 0 by the session's
// goroutine as its first action: it may arrive just after Open returns, and
// always before any event of a turn. Resuming restarts the scenario from
// its first turn; the scripted agent keeps no state across sessions.
func (t *Transport) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	if sink == nil {
		return nil, messages.FieldError(messages.OpStart, "sink", "required")
	}
	if err := ctx.Err(); err != nil {
		return nil, messages.Wrap(messages.CodeTimeout, messages.OpStart, err, "opening the scripted session was cancelled")
	}
	posture := spec.Posture
	if posture == "" {
		posture = messages.PostureDefault
	}
	if !posture.Valid() {
		return nil, messages.FieldError(messages.OpStart, "posture", "unknown posture %q", spec.Posture)
	}
	if spec.Effort != "" && !spec.Effort.Valid() {
		return nil, messages.FieldError(messages.OpStart, "effort", "unknown effort %q", spec.Effort)
	}
	ws, err := newWorkspace(spec.Cwd)
	if err != nil {
		return nil, err
	}
	sc, err := t.scenarioFor(spec)
	if err != nil {
		return nil, err
	}
	ext := spec.ResumeExternalID
	if ext == "" {
		ext = "script-" + transports.RandomHex(8)
	}
	var allowed []string
	if spec.AllowedTools != nil {
		allowed = append([]string{}, spec.AllowedTools...)
	}
	s := newSession(sessionConfig{
		scenario:   sc,
		ws:         ws,
		sink:       sink,
		externalID: ext,
		model:      spec.Model,
		effort:     spec.Effort,
		posture:    posture,
		allowed:    allowed,
		delayScale: t.delayScale,
		outputCap:  t.outputCap,
	})
	go s.run()
	return s, nil
}

// scenarioFor picks and validates a session's scenario.
func (t *Transport) scenarioFor(spec transports.SessionSpec) (*Scenario, error) {
	name := subprocess.EnvValue(spec.Env, EnvScenario)
	switch {
	case name == "builtin:demo":
		return DemoScenario(), nil
	case name == "builtin:echo":
		return EchoScenario(), nil
	case name != "":
		path := name
		if !filepath.IsAbs(path) && spec.Cwd != "" {
			path = filepath.Join(spec.Cwd, path)
		}
		sc, err := LoadScenario(path)
		if err != nil {
			e := messages.AsError(messages.OpStart, err)
			return nil, &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart,
				Field: "env." + EnvScenario, Message: e.Message, Err: err}
		}
		return sc, nil
	case t.scenario != nil:
		if err := t.scenario.Validate(); err != nil {
			e := messages.AsError(messages.OpStart, err)
			return nil, &messages.Error{Code: messages.CodeInvalid, Op: messages.OpStart, Field: "scenario",
				Message: "the transport's scenario is invalid: " + e.Error(), Err: err}
		}
		return t.scenario, nil
	}
	return EchoScenario(), nil
}

// Package native is codesession's own backend (the seeds' "neo"): an
// in-process agent loop that talks to an Anthropic-compatible or
// OpenAI-compatible model endpoint and acts through a small gated toolset.
// It needs no agent CLI, and it powers the offline demo.
//
// It owns the loop (session.go), the providers (anthropic.go: Messages
// through github.com/anthropics/anthropic-sdk-go; openai.go: Responses and
// Chat Completions through github.com/openai/openai-go), retries
// (retry.go: 408/409/429/5xx and connection failures, exponential backoff
// with cenkalti/backoff, never shorter than Retry-After, never once the
// answer began to stream), the tools (tools.go, bash.go: read, write,
// edit, glob, grep, ls, bash), the tool gate (transports/gate) and the posture
// policy (policy.go).
//
// # A turn
//
//	StartTurn --> user message --> model call (streamed: EvText deltas, EvThinking)
//	                 ^                  |
//	                 |      tool calls? -- no --> EvText, EvTurnEnd{completed}
//	                 |                  | yes
//	                 |     per call: EvToolUse, posture gate (run | ask: EvClarification | refuse),
//	                 |     the tool, EvToolResult (capped, the cap reported)
//	                 +---- tool results as the next user message
//
// A turn ends when the model answers without a tool call (completed), at
// the per-turn round cap (completed, with an EvWarning that says so: a
// clean stop), on Interrupt or a cancelled clarification (interrupted: the
// request in flight is cancelled and a running bash command's process
// group killed), or when a model call fails for good (EvError, then
// EvTurnEnd{error} whose text names the endpoint and its answer). Usage is
// summed over the turn's rounds; cost is reported when a price table is
// configured (WithPrices, or CODESESSION_NATIVE_PRICES). The conversation
// is kept in memory for the session's later turns; there is no resume.
//
// # The endpoint
//
// Read from the backend environment (SessionSpec.Env, then the process
// environment) by the SDKs' conventions: ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), OPENAI_BASE_URL and
// OPENAI_API_KEY. CODESESSION_NATIVE_PROVIDER picks anthropic,
// openai-responses or openai-chat (default: anthropic when an Anthropic key
// is set, else openai-responses). The model is SessionSpec.Model (a class
// cheap/standard/frontier maps per provider), else
// CODESESSION_NATIVE_MODEL, else the provider's default. Effort goes to the
// provider's reasoning knob (Anthropic output_config.effort, OpenAI
// reasoning effort); all three APIs have a max level, so nothing is
// clamped (clampEffort clamps max to high for a provider without one).
//
// # The gate
//
// Workspace.Resolve (seed 002, "The gate"): every path argument must
// resolve inside the workspace after symlinks, read both from the
// workspace as given and from its real path, each reading resolved with
// ".." taken lexically and as the kernel takes it; all readings must land
// inside on the same file; a dangling symlink at any depth is refused even
// when it points inside. Tools open the real path the gate returned (the
// last component with O_NOFOLLOW). Glob patterns have their literal prefix
// resolved the same way, ".." after a wildcard refused, every {a,b}
// expansion checked, and every match checked again (a match that resolves
// outside is left out and counted in the result). bash is not path-gated:
// posture is its boundary, and it runs in the workspace in its own process
// group under a wall clock, with the API keys and founder credentials
// scrubbed from its environment.
//
// # Posture
//
// plan: read-only tools (read, glob, grep, ls) only, and only those are
// offered to the model; default: reads run, write/edit and bash ask;
// acceptEdits: writes run, bash asks; full: everything runs. allowedTools
// narrows the set further (and the offered tools with it). A refusal or a
// deny comes back to the model as an error tool result with the reason;
// allow_session remembers the tool for the session.
//
// # Concurrency
//
// Each session runs its turns on one goroutine, the only caller of the
// Sink and the only owner of the conversation. StartTurn, Answer,
// Interrupt and SetPosture change state under a mutex and signal through a
// channel or a context; none blocks. Close cancels everything, waits for
// the goroutine, and no event is emitted once it returned. The Transport
// is safe for concurrent use.
//
// # Testing
//
// gate_test.go holds every seed 002 case as a table (a workspace opened
// through a symlink and by its real path; dangling links at every depth;
// ".." through real and given parents; absolute paths; glob escapes) and
// FuzzGate, whose seeds plain go test runs. native_test.go drives sessions
// against transports/modelmock in every posture, and checks the round cap,
// a 429 retried with Retry-After, a 401 naming the endpoint, interrupts of
// a stream, a command and a question; conformance_test.go runs the
// transporttest suite. openai_test.go checks the OpenAI wires against a
// small SSE fake until modelmock serves them.
package native

// Package learning turns finished sessions into knowledge (seed 000 §7,
// §10, with seed 004's evidence discipline). This root package holds the
// verdict: Tally folds a session's events into the evidence a verdict needs
// (what changed, what was denied or refused, interventions, the concrete
// model), and Infer derives an honest verdict from it when the driver gave
// none: success only with evidence of completed work, never partial.
//
// The sub-packages own the rest of the loop:
//
//	outcomes     one outcome record per session run, appended at release to
//	             $CODESESSION_HOME/learning/outcomes.jsonl (idempotent)
//	trackrecord  the list-backends track-record lines, cached ~60 s
//	lessons      the distillation pass, the lesson book and the low-trust
//	             injection block
//	routing      model-class sentinels, effort checks and routing guidance
//	loop         the facade the runtime wires in
//
// Everything here is pure data and functions, safe to use from one
// goroutine at a time (Tally) or read-only (the rest); the sub-packages say
// their own concurrency. Tests use table cases and injected clocks.
package learning

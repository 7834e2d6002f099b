package acp

import (
	"context"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Agent is what a thin backend tells the client about its CLI: how to
// find and start it, how to point it at the session, and which of the
// agent's session modes stand for a posture. Everything else (the
// protocol, events, permissions, the gate, interrupt, resume) is the
// client's.
type Agent struct {
	// Descriptor is the backend's capability descriptor.
	Descriptor messages.Descriptor
	// Command is the executable looked up on PATH when neither WithBinary
	// nor EnvBinary names one.
	Command string
	// EnvBinary names the environment variable that holds the executable
	// (CI sets it to the pinned install).
	EnvBinary string
	// Package is the npm package the CLI ships in; Probe reads its
	// version from the package.json above the binary, without running it.
	Package string
	// Install says how to install the pinned version, for the probe's reason.
	Install string
	// ParseVersion turns the output of `<binary> --version` into a version
	// ("" when it says none).
	ParseVersion func(out string) string
	// Launch returns the argv after the binary and the extra environment of
	// a session's process. scratch is a private directory of the session,
	// removed at Close, for files such as a per-session config. It fails
	// with a *messages.Error (invalid or unsupported: an effort or model
	// the agent cannot take) and is the one place a backend says so.
	Launch func(spec transports.SessionSpec, scratch string) (args, env []string, err error)
	// Modes maps a posture to the id of the agent's session mode (ACP
	// session/set_mode, or a select config option of category "mode")
	// that the posture selects; a posture not in the map leaves the mode
	// as the agent has it. The client applies its own permission policy on
	// top in every posture.
	Modes map[messages.Posture]string
	// Documented are the agent's own variables (proc.EnvPolicy patterns)
	// its process takes from the daemon's environment besides the proc
	// allowlist; a documented founder-credential name is the agent's login,
	// not refused.
	Documented []string
	// Scrub lists variables Documented matches that the process still never
	// takes from the daemon's environment.
	Scrub []string
	// BeforeLoad, when set, runs before the process of a resume (spec has
	// ResumeExternalID) is started: what the agent needs first so its
	// session/load finds the session (gemini: a later minute). It returns
	// ctx's error when ctx ends first.
	BeforeLoad func(ctx context.Context, spec transports.SessionSpec) error
}

package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/messages"
)

// addIsolationFlags adds --isolate and --exclusive to a starting command.
func addIsolationFlags(fs *pflag.FlagSet, isolate *string, exclusive *bool) {
	fs.StringVar(isolate, "isolate", "", "worktree: work in a git worktree of its own, on branch codesession/<short id> (default: the config's isolate, else none)")
	fs.BoolVar(exclusive, "exclusive", false, "refuse to start while another live session works in the same directory (otherwise a warning)")
}

func checkIsolate(cmd, v string) error {
	switch v {
	case "", messages.IsolateNone, messages.IsolateWorktree:
		return nil
	}
	return usagef(cmd, "--isolate: want none or worktree, got %q", v)
}

// writeWorktree says where an isolated session's work is and how to take it.
func writeWorktree(w io.Writer, wt *messages.Worktree) {
	if wt == nil {
		return
	}
	fmt.Fprintf(w, "  worktree  %s (branch %s)\n", wt.Path, wt.Branch)
}

// writeWorktreeAtStop tells the person at the end of a session where its
// work is: the branch, the worktree, and the command that merges it.
func writeWorktreeAtStop(w io.Writer, wt *messages.Worktree) {
	if wt == nil {
		return
	}
	fmt.Fprintf(w, "the session's work is on branch %s (worktree %s)\n", wt.Branch, wt.Path)
	fmt.Fprintf(w, "  merge it: git -C %s merge %s\n", controlplane.ShellQuote(wt.Repo), wt.Branch)
}

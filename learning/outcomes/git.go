package outcomes

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Revision returns the HEAD commit of the work tree around dir, or "" when
// there is none (no git, not a work tree, an unborn HEAD, a timeout).
func Revision(ctx context.Context, dir string) string {
	if dir == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// no shell, no pager, no optional locks; rev-parse runs no hooks
	cmd := exec.CommandContext(ctx, "git", "-c", "core.fsmonitor=false", "rev-parse", "--verify", "-q", "HEAD")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

package proc_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
)

func TestEnvPolicy(t *testing.T) {
	daemon := []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "GITEA_TOKEN=gt-123456", "SSH_AUTH_SOCK=/tmp/agent.sock",
		"ANTHROPIC_AUTH_TOKEN=sk-ant-abcdef", "RANDOM_VAR=x", "AWS_SECRET_ACCESS_KEY=awsabcdef"}
	claude := proc.EnvPolicy{Backend: "claude-code", Documented: []string{"ANTHROPIC_*"}}

	err := claude.Check(daemon, nil)
	var ce *proc.CredentialError
	require.True(t, errors.As(err, &ce), "founder credentials in the daemon's environment refuse the start: %v", err)
	assert.Equal(t, []string{"AWS_SECRET_ACCESS_KEY", "GITEA_TOKEN", "SSH_AUTH_SOCK"}, ce.Names,
		"the backend's own documented token is not a founder credential for it")
	assert.Equal(t, 20, ce.ExitCode())
	assert.Contains(t, ce.Error(), "backends.claude-code.passEnv")

	claude.Pass = []string{"GITEA_TOKEN", "SSH_AUTH_SOCK"}
	err = claude.Check(daemon, []string{"AWS_SECRET_ACCESS_KEY=explicit"})
	require.NoError(t, err, "passed by name, or given a value explicitly")

	env := claude.Build(daemon, []string{"AWS_SECRET_ACCESS_KEY=explicit", "EXTRA=1"})
	assert.ElementsMatch(t, []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "GITEA_TOKEN=gt-123456", "SSH_AUTH_SOCK=/tmp/agent.sock",
		"ANTHROPIC_AUTH_TOKEN=sk-ant-abcdef", "AWS_SECRET_ACCESS_KEY=explicit", "EXTRA=1"}, env,
		"an allowlist: RANDOM_VAR stays out")

	native := proc.EnvPolicy{Backend: "native"}
	assert.NotContains(t, native.Build(daemon, nil), "GITEA_TOKEN=gt-123456", "never passed unless named")
	assert.ElementsMatch(t, []string{"gt-123456", "/tmp/agent.sock", "sk-ant-abcdef", "awsabcdef"}, proc.Secrets(daemon))
}

// TestEnvironLayers: the one builder every backend uses: the allowlist and
// documented variables of the daemon less Scrub, HOME, then the layers,
// the last value of a name winning where it first stood.
func TestEnvironLayers(t *testing.T) {
	daemon := []string{"PATH=/bin", "HOME=/root", "NODE_OPTIONS=--inspect", "CODEX_HOME=/mine", "OPENAI_API_KEY=sk-1", "GITEA_TOKEN=gt-1", "A=0"}
	p := proc.EnvPolicy{Backend: "codex", Documented: []string{"OPENAI_*", "CODEX_*"}, Scrub: []string{"CODEX_HOME"}}
	env := p.Environ(daemon, "/h", []string{"CODEX_HOME=/s", "A=1"}, []string{"A=2"})
	assert.Equal(t, []string{"PATH=/bin", "HOME=/h", "OPENAI_API_KEY=sk-1", "CODEX_HOME=/s", "A=2"}, env)
	p.Pass = []string{"CODEX_HOME"}
	assert.Contains(t, p.Environ(daemon, ""), "CODEX_HOME=/mine", "passed by name beats Scrub")
}

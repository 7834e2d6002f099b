package proc_test

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/proc"
)

// pathMatchAny is the matcher IsCredential had before issue 35: a
// path.Match per pattern. It is the oracle of the compiled set and the
// baseline of its benchmark.
func pathMatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// TestIsCredentialEveryPattern: every founder-credential pattern, its star
// matching nothing, a word or an underscore, is a credential; near misses
// (a star crossing a '/', a missing or extra letter at a fixed end) are
// not; and every answer is path.Match's.
func TestIsCredentialEveryPattern(t *testing.T) {
	var names []string
	for _, p := range proc.FounderCredentials {
		for _, fill := range []string{"", "GITEA", "_", "A_B"} {
			n := strings.ReplaceAll(p, "*", fill)
			require.True(t, proc.IsCredential(n), "%s from %s", n, p)
			names = append(names, n, n+"S", "X"+n, "dir/"+n, n+"/x", strings.ToLower(n), n[:len(n)-1])
		}
	}
	names = append(names, "", "/", "TOKEN", "_TOKEN", "GITEA_TOKENS", "MY_SECRET", "SECRET_X", "A_SECRETX",
		"CLOUDSDK_AUTH", "CLOUDSDK_AUTH_", "CLOUDSDK_AUTH_/", "AWS_PROFILES", "PATH", "HOME", "ANTHROPIC_API_KEY")
	for _, n := range names {
		assert.Equal(t, pathMatchAny(proc.FounderCredentials, n), proc.IsCredential(n), "%q", n)
	}
	for _, n := range []string{"/", "dir/GITEA_TOKEN", "GITEA_TOKENS", "SECRET_X", "CLOUDSDK_AUTH", "PATH", "ANTHROPIC_API_KEY"} {
		assert.False(t, proc.IsCredential(n), "%q", n)
	}
	for _, n := range []string{"_TOKEN", "MY_SECRET", "A_SECRET_B", "CLOUDSDK_AUTH_", "KUBECONFIG"} {
		assert.True(t, proc.IsCredential(n), "%q", n)
	}
}

// randomName draws a name from the letters, the separators and the
// metacharacters of the patterns, and from whole pieces of them, so that
// near misses are common.
func randomName(r *rand.Rand, pieces []string) string {
	const alphabet = "AB_/*?[]\\-x"
	var b strings.Builder
	for n := r.IntN(6); n > 0; n-- {
		if r.IntN(2) == 0 {
			b.WriteString(pieces[r.IntN(len(pieces))])
		} else {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
	}
	return b.String()
}

// TestCompiledPatternsAreAPathMatchLoop: on random names, and random
// pattern sets (stars, other metacharacters, slashes, malformed classes),
// the compiled set answers as the path.Match loop does.
func TestCompiledPatternsAreAPathMatchLoop(t *testing.T) {
	var pieces []string
	for _, p := range append(append([]string{}, proc.FounderCredentials...), proc.BaseAllow...) {
		pieces = append(pieces, strings.Split(p, "*")...)
	}
	r := rand.New(rand.NewPCG(35, 1))
	for range 20000 {
		n := randomName(r, pieces)
		require.Equal(t, pathMatchAny(proc.FounderCredentials, n), proc.IsCredential(n), "%q", n)
		require.Equal(t, pathMatchAny(proc.BaseAllow, n), proc.MatchCompiled(proc.BaseAllow, n), "%q", n)
	}
	for range 20000 {
		pats := make([]string, r.IntN(4))
		for i := range pats {
			pats[i] = randomName(r, pieces)
		}
		n := randomName(r, pieces)
		require.Equal(t, pathMatchAny(pats, n), proc.MatchCompiled(pats, n), "%q against %q", n, pats)
	}
}

// FuzzIsCredential: any name, and any one pattern, answer as path.Match.
func FuzzIsCredential(f *testing.F) {
	for _, s := range []string{"GITEA_TOKEN", "A_SECRET_B", "x/A_TOKEN", "CLOUDSDK_AUTH_", "*", "**", "a*b", "[", "\\*"} {
		f.Add(s, s)
	}
	f.Add("*_TOKEN", "dir/GITEA_TOKEN")
	f.Add("LC_*", "LC_ALL")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if got, want := proc.IsCredential(name), pathMatchAny(proc.FounderCredentials, name); got != want {
			t.Fatalf("IsCredential(%q) = %v, path.Match says %v", name, got, want)
		}
		pats := []string{pattern}
		if got, want := proc.MatchCompiled(pats, name), pathMatchAny(pats, name); got != want {
			t.Fatalf("%q against %q: compiled %v, path.Match %v", name, pattern, got, want)
		}
	})
}

// benchEnv is the names of a developer's environment, a few credentials
// among them: what Check and Build scan at every session start.
var benchEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LC_ALL", "TZ", "TMPDIR", "PWD", "OLDPWD",
	"SHLVL", "EDITOR", "PAGER", "LESS", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_SESSION_ID",
	"DBUS_SESSION_BUS_ADDRESS", "GOPATH", "GOROOT", "GOFLAGS", "GOCACHE", "NODE_OPTIONS", "NVM_DIR", "CARGO_HOME",
	"RUSTUP_HOME", "HISTSIZE", "HISTFILE", "MAIL", "HOSTNAME", "DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION",
	"SSH_TTY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITEA_TOKEN", "SSH_AUTH_SOCK", "HTTPS_PROXY", "NO_PROXY",
	"CODESESSION_HOME", "_",
}

// BenchmarkIsCredential: one environment scanned, the path.Match loop of
// before issue 35 against the compiled set.
func BenchmarkIsCredential(b *testing.B) {
	b.Run("pathMatch", func(b *testing.B) {
		for b.Loop() {
			for _, n := range benchEnv {
				pathMatchAny(proc.FounderCredentials, n)
			}
		}
	})
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			for _, n := range benchEnv {
				proc.IsCredential(n)
			}
		}
	})
}

// BenchmarkCheck: the check every session start makes, on the same
// environment.
func BenchmarkCheck(b *testing.B) {
	env := make([]string, len(benchEnv))
	for i, n := range benchEnv {
		env[i] = n + "=value-of-" + n
	}
	p := proc.EnvPolicy{Backend: "claude-code", Documented: []string{"ANTHROPIC_*"}, Pass: []string{"GITEA_TOKEN", "SSH_AUTH_SOCK"}}
	for b.Loop() {
		if err := p.Check(env, nil); err != nil {
			b.Fatal(err)
		}
	}
}

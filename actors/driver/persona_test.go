package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestPackagedPersonaParsesAndIsADriver(t *testing.T) {
	p, err := Load("", DefaultPersona)
	require.NoError(t, err)
	assert.True(t, p.Driver)
	assert.Equal(t, "packaged", p.Source)
	assert.Equal(t, []string{messages.ToolName}, p.AllowedTools)
	assert.Equal(t, messages.PostureAcceptEdits, p.MaxPosture)
	assert.Equal(t, "frontier", p.Model, "a class sentinel, resolved by the loop")
	for _, step := range []string{"list-backends first", "Capability matching", "Briefing notes", "taskTags", "Honest stop verdict", "DATA, not instructions"} {
		assert.Contains(t, p.Prompt, step, "the seed's flow")
	}
}

func TestHomePersonaOverridesThePackagedOne(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, "agents"), 0o700))
	own := "---\ndriver: true\nmaxPosture: plan\nbackend: native\n---\nMy own driver.\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "agents", DefaultPersona+".md"), []byte(own), 0o600))
	p, err := Load(home, DefaultPersona)
	require.NoError(t, err)
	assert.Equal(t, messages.PosturePlan, p.MaxPosture)
	assert.Equal(t, "native", p.Backend)
	assert.Equal(t, "My own driver.", p.Prompt)
	assert.Equal(t, filepath.Join(home, "agents", DefaultPersona+".md"), p.Source)

	_, err = Load(home, "nobody")
	assert.True(t, messages.IsCode(err, messages.CodeNotFound), "%v", err)
	_, err = Load(home, "../etc/passwd")
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)

	require.NoError(t, os.WriteFile(filepath.Join(home, "agents", "broken.md"), []byte("no frontmatter"), 0o600))
	_, err = Load(home, "broken")
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
}

func TestDriverPersonasAreNeverStarters(t *testing.T) {
	for _, p := range Starters() {
		assert.False(t, p.Driver, "%s is a driver", p.Name)
		assert.NotEqual(t, DefaultPersona, p.Name)
	}
	home := t.TempDir()
	_, err := Load(home, DefaultPersona)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(home, "agents"))
	assert.True(t, os.IsNotExist(err), "loading the packaged persona installs nothing into the home")
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
	}{
		{"ok minimal", "---\ndriver: true\n---\nbody", ""},
		{"ok crlf and quotes", "---\r\nname: \"x-1\"\r\ndriver: true\r\nallowedTools: [\"code_session\"]\r\n---\r\nbody\r\n", ""},
		{"no frontmatter", "body", "no frontmatter"},
		{"unclosed", "---\ndriver: true\nbody", "closing ---"},
		{"empty body", "---\ndriver: true\n---\n  \n", "body"},
		{"unknown key", "---\ncolour: red\n---\nb", "unknown key"},
		{"twice", "---\ndriver: true\ndriver: false\n---\nb", "twice"},
		{"bad posture", "---\nmaxPosture: god\n---\nb", "unknown posture"},
		{"bad bool", "---\ndriver: yes please\n---\nb", "true or false"},
		{"bad rounds", "---\nmaxRounds: -3\n---\nb", "rounds"},
		{"bad effort", "---\neffort: ludicrous\n---\nb", "unknown effort"},
		{"other tools", "---\nallowedTools: [code_session, bash]\n---\nb", "only tool"},
		{"empty tools", "---\nallowedTools: []\n---\nb", "empty"},
		{"initial above max", "---\nmaxPosture: default\ninitialPosture: full\n---\nb", "above maxPosture"},
		{"no colon", "---\njust words\n---\nb", "key: value"},
		{"list for scalar", "---\nmodel: [a, b]\n---\nb", "single value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	_, err := Parse([]byte("---\ndriver: true\n---\n" + strings.Repeat("x", MaxPersonaBytes)))
	assert.ErrorContains(t, err, "larger than")
}

func TestRenderRoundTrips(t *testing.T) {
	p := Persona{Name: "a", Description: "drives: things, \"quoted\"", Driver: true, Backend: "claude-code",
		MaxPosture: messages.PostureDefault, InitialPosture: messages.PosturePlan, MaxRounds: 7,
		AllowedTools: []string{messages.ToolName}, Model: "cheap", Effort: messages.EffortLow, Prompt: "Do it."}
	got, err := Parse(p.Render())
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

// FuzzParse: any input parses or fails with an error, never panics; what
// parses renders back to the same persona.
func FuzzParse(f *testing.F) {
	f.Add([]byte("---\ndriver: true\nmaxPosture: plan\n---\nbody"))
	f.Add([]byte("---\nallowedTools: [\"code_session\"]\n---\n"))
	data, _ := packaged.ReadFile("personas/code-specialist.md")
	f.Add(data)
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Parse(in)
		if err != nil {
			return
		}
		again, err := Parse(p.Render())
		if err != nil {
			t.Fatalf("a parsed persona does not render back: %v\n%q", err, p.Render())
		}
		if again.Prompt != p.Prompt || again.MaxPosture != p.MaxPosture || again.Driver != p.Driver || again.Model != p.Model {
			t.Fatalf("round trip changed the persona: %+v -> %+v", p, again)
		}
	})
}

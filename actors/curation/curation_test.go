package curation

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestBuiltinCatalogHasEightPinnedEntries(t *testing.T) {
	c := Builtin()
	require.GreaterOrEqual(t, len(c.Entries), 8)
	for _, id := range []string{"supabase", "playwright", "github", "stripe", "postgres", "docker-compose", "lsp", "webapp-testing"} {
		e, ok := c.Lookup(id)
		require.True(t, ok, id)
		require.NotEmpty(t, e.Source.Identity())
	}
}

func TestCatalogRefusesUnpinnedAndUnknown(t *testing.T) {
	base := func(src string) string {
		return `{"version":1,"entries":[{"id":"x","name":"X","tier":"T1","source":` + src +
			`,"detect":[{"kind":"file-exists","path":"a"}],"instructions":"i"}]}`
	}
	for name, tc := range map[string]struct{ data, field string }{
		"branch":        {base(`{"repo":"o/r","commit":"main"}`), "entries.x.source.commit"},
		"short sha":     {base(`{"repo":"o/r","commit":"abc123"}`), "entries.x.source.commit"},
		"npm range":     {base(`{"npm":"p","version":"^1.2.3"}`), "entries.x.source.version"},
		"npm latest":    {base(`{"npm":"p","version":"latest"}`), "entries.x.source.version"},
		"no pin":        {base(`{}`), "entries.x.source"},
		"unknown field": {strings.Replace(base(`{"npm":"p","version":"1.0.0"}`), `"name":"X"`, `"name":"X","extra":1`, 1), ""},
		"bad tier":      {strings.Replace(base(`{"npm":"p","version":"1.0.0"}`), `"T1"`, `"T9"`, 1), "entries.x.tier"},
		"bad regexp": {`{"version":1,"entries":[{"id":"x","name":"X","tier":"T0","source":{"npm":"p","version":"1.0.0"},` +
			`"detect":[{"kind":"file-content","path":"a","pattern":"("}],"instructions":"i"}]}`, "entries.x.detect[0].pattern"},
		"local mcp as T2R": {`{"version":1,"entries":[{"id":"x","name":"X","tier":"T2R","source":{"npm":"p","version":"1.0.0"},` +
			`"detect":[{"kind":"file-exists","path":"a"}],"mcp":{"name":"x","command":"npx","args":["p@1.0.0"]}}]}`, "entries.x.tier"},
		"command not the pin": {`{"version":1,"entries":[{"id":"x","name":"X","tier":"T2","source":{"npm":"p","version":"1.0.0"},` +
			`"detect":[{"kind":"file-exists","path":"a"}],"mcp":{"name":"x","command":"npx","args":["p@latest"]}}]}`, "entries.x.mcp.args"},
		"trailing": {base(`{"npm":"p","version":"1.0.0"}`) + "{}", ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tc.data))
			require.Error(t, err)
			var me *messages.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, messages.CodeInvalid, me.Code)
			if tc.field != "" {
				require.Equal(t, tc.field, me.Field, me.Message)
			}
		})
	}
}

func TestLoadCatalogOverride(t *testing.T) {
	home := t.TempDir()
	c, err := LoadCatalog(home)
	require.NoError(t, err)
	require.Equal(t, Builtin().Digest(), c.Digest())
	over := `{"version":1,"entries":[{"id":"only","name":"Only","tier":"T0","source":{"repo":"o/r","commit":"` +
		strings.Repeat("a", 40) + `"},"detect":[{"kind":"file-exists","path":"x"}],"instructions":"hi"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(home, CatalogFile), []byte(over), 0o600))
	c, err = LoadCatalog(home)
	require.NoError(t, err)
	require.Len(t, c.Entries, 1)
	require.NoError(t, os.WriteFile(filepath.Join(home, CatalogFile), []byte(`{"version":1,"entries":[],"x":1}`), 0o600))
	_, err = LoadCatalog(home)
	require.Error(t, err)
}

// fixture repositories, as file trees
var fixtures = map[string]MapTree{
	"plain": {"README.md": "# hello\n", "main.c": "int main(){}\n"},
	"supabase": {
		"package.json":         `{"name":"app","dependencies":{"@supabase/supabase-js":"^2.45.0","react":"18"}}`,
		"supabase/config.toml": "project_id = \"app\"\n",
	},
	"playwright": {"package.json": `{"devDependencies":{"@playwright/test":"1.49.0"},"scripts":{"test":"playwright test"}}`},
	"go-stripe-ci": {
		"go.mod":                    "module example.com/x\n\ngo 1.22\n\nrequire (\n\tgithub.com/stripe/stripe-go v1.0.0\n\tgithub.com/jackc/pgx/v5 v5.5.0\n)\n",
		".github/workflows/ci.yml":  "jobs:\n  t:\n    steps:\n      - uses: actions/checkout@v4\n      - run: go test ./...\n",
		".github/workflows/x.txt":   "uses: actions/checkout@v4\n",
		"docker-compose.yml":        "services:\n  db:\n    image: postgres:16\n",
		"unrelated/package.json":    `{"dependencies":{"stripe":"1"}}`,
		".github/workflows/rel.yml": "jobs: {}\n",
	},
	"python": {"pyproject.toml": "[project]\nname = \"x\"\ndependencies = [\n  \"supabase>=2.0\",\n  \"psycopg[binary]==3.2\",\n]\n"},
}

func TestDetectFixtures(t *testing.T) {
	c := Builtin()
	for name, want := range map[string][]string{
		"plain":        nil,
		"supabase":     {"supabase"},
		"playwright":   {"playwright", "webapp-testing"},
		"go-stripe-ci": {"github", "stripe", "postgres", "docker-compose", "lsp"},
		"python":       {"supabase", "postgres", "lsp"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, want, DetectTree(fixtures[name], c))
		})
	}
}

func writeTree(t *testing.T, tree MapTree) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range tree {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
	return dir
}

func TestDetectProjectCachesByTreeAndRefusesEscapes(t *testing.T) {
	home := t.TempDir()
	dir := writeTree(t, fixtures["supabase"])
	outside := writeTree(t, MapTree{"config.toml": "x"})
	// a symlink out of the project is not followed
	require.NoError(t, os.Symlink(filepath.Join(outside, "config.toml"), filepath.Join(dir, "go.mod")))
	c := Builtin()
	now := time.Unix(1700000000, 0)
	p, cached, err := DetectProject(home, dir, c, now)
	require.NoError(t, err)
	require.False(t, cached)
	require.Equal(t, []string{"supabase"}, p.Detected)
	p2, cached, err := DetectProject(home, dir, c, now)
	require.NoError(t, err)
	require.True(t, cached)
	require.Equal(t, p.Key, p2.Key)
	// a change to a file the rules read is a new key
	require.NoError(t, os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte("services: {}\n"), 0o644))
	p3, cached, err := DetectProject(home, dir, c, now)
	require.NoError(t, err)
	require.False(t, cached)
	require.NotEqual(t, p.Key, p3.Key)
	require.Equal(t, []string{"supabase", "docker-compose"}, p3.Detected)
	// the cache is under the home, never in the project
	ents, _ := os.ReadDir(filepath.Join(home, ProfilesDir))
	require.Len(t, ents, 2)
}

func TestDetectReadsAreBounded(t *testing.T) {
	big := strings.Repeat(" ", MaxReadBytes) + `"test": 1`
	tree := MapTree{"package.json": big}
	b, err := tree.ReadFile("package.json")
	require.NoError(t, err)
	require.Len(t, b, MaxReadBytes)
	require.Empty(t, DetectTree(tree, Builtin()), "a match past the read cap is not seen")
}

func entry(t *testing.T, id string) Entry {
	e, ok := Builtin().Lookup(id)
	require.True(t, ok)
	return e
}

func TestLedgerGate(t *testing.T) {
	home := t.TempDir()
	l := NewLedger(home, func() time.Time { return time.Unix(1700000000, 0) })
	// T0/T1/T2R pass without asking
	for _, id := range []string{"docker-compose", "lsp", "supabase"} {
		g, err := l.Check(entry(t, id), "/p", "cs_1")
		require.NoError(t, err)
		require.Equal(t, GatePass, g, id)
	}
	list, err := l.List()
	require.NoError(t, err)
	require.Empty(t, list)
	pw := entry(t, "playwright")
	g, err := l.Check(pw, "/p", "cs_1")
	require.NoError(t, err)
	require.Equal(t, GateAwaiting, g)
	g, err = l.Check(pw, "/q", "cs_2")
	require.NoError(t, err)
	require.Equal(t, GateAwaiting, g)
	list, err = l.List()
	require.NoError(t, err)
	require.Len(t, list, 1, "one request per pin")
	require.Equal(t, messages.ApprovalPending, list[0].Status)
	require.Equal(t, []string{"/p", "/q"}, list[0].Projects)
	require.Equal(t, "npm:@playwright/mcp@0.0.86", list[0].Identity)

	_, err = l.Decide(messages.ApprovalDecision{ID: "nope", Decision: "approve"})
	require.True(t, messages.IsCode(err, messages.CodeNotFound))
	_, err = l.Decide(messages.ApprovalDecision{ID: list[0].ID, Decision: "maybe"})
	require.True(t, messages.IsCode(err, messages.CodeInvalid))
	a, err := l.Decide(messages.ApprovalDecision{ID: list[0].ID, Decision: "approve"})
	require.NoError(t, err)
	require.Equal(t, messages.ApprovalApproved, a.Status)
	g, err = l.Check(pw, "/p", "cs_3")
	require.NoError(t, err)
	require.Equal(t, GatePass, g)

	// a pin bump is a new identity: it asks again
	bumped := pw
	bumped.Source.Version = "0.0.87"
	require.NotEqual(t, ApprovalID(pw), ApprovalID(bumped))
	g, err = l.Check(bumped, "/p", "cs_4")
	require.NoError(t, err)
	require.Equal(t, GateAwaiting, g)

	// deny
	pg := entry(t, "postgres")
	_, _ = l.Check(pg, "/p", "cs_5")
	_, err = l.Decide(messages.ApprovalDecision{ID: ApprovalID(pg), Decision: "deny"})
	require.NoError(t, err)
	g, err = l.Check(pg, "/p", "cs_6")
	require.NoError(t, err)
	require.Equal(t, GateDenied, g)
	list, _ = l.List()
	require.Len(t, list, 3)
	require.Equal(t, messages.ApprovalPending, list[0].Status, "pending first")
	require.Contains(t, list[0].Question, "tier T2")
	fi, err := os.Stat(filepath.Join(home, ApprovalsFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

type mapFetcher map[string][]SkillFile

func (m mapFetcher) FetchSkill(_ context.Context, repo, commit, dir string) ([]SkillFile, error) {
	if f, ok := m[repo+"@"+commit+":"+dir]; ok {
		return f, nil
	}
	return nil, messages.Errorf(messages.CodeUnavailable, "skill", "no such skill")
}

func skillFetcher() mapFetcher {
	lsp, _ := Builtin().Lookup("lsp")
	wt, _ := Builtin().Lookup("webapp-testing")
	return mapFetcher{
		lsp.Source.Repo + "@" + lsp.Source.Commit + ":":               {{Path: "SKILL.md", Data: []byte("---\nname: lsp\n---\nuse the LSP\n")}},
		wt.Source.Repo + "@" + wt.Source.Commit + ":" + wt.Skill.Path: {{Path: "SKILL.md", Data: []byte("# test\n")}, {Path: "scripts/run.py", Data: []byte("print(1)\n")}},
	}
}

func resolve(t *testing.T, home, cwd, backend, sid string, f SkillFetcher) Result {
	t.Helper()
	c := &Curator{Home: home, Fetcher: f, Now: func() time.Time { return time.Unix(1700000000, 0) }}
	return c.Resolve(context.Background(), Request{SessionID: sid, Cwd: cwd, Backend: backend})
}

func TestResolveSupabaseAndPlain(t *testing.T) {
	home := t.TempDir()
	plain := resolve(t, home, writeTree(t, fixtures["plain"]), "claude-code", "cs_plain", skillFetcher())
	require.Nil(t, plain.Plan, "a plain repository gets nothing")
	require.Empty(t, plain.Meta.CapabilityIDs)
	require.NoDirExists(t, plain.Dir)

	res := resolve(t, home, writeTree(t, fixtures["supabase"]), "claude-code", "cs_supa", skillFetcher())
	require.NotNil(t, res.Plan)
	require.Equal(t, []string{"supabase"}, res.Meta.CapabilityIDs)
	require.Equal(t, []string{"supabase"}, res.Meta.Applied)
	require.Equal(t, map[string]string{"supabase": "T2R"}, res.Meta.Tiers)
	require.Len(t, res.Meta.TokenScopeNotes, 1)
	require.Contains(t, res.Meta.TokenScopeNotes[0], "$SUPABASE_ACCESS_TOKEN must be read-only")
	require.Equal(t, []string{"SUPABASE_ACCESS_TOKEN"}, res.Plan.PassEnv)
	var cfg struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	b, err := os.ReadFile(res.Plan.ConfigFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.Equal(t, "https://mcp.supabase.com/mcp?read_only=true", cfg.MCPServers["supabase"]["url"])
	require.NotContains(t, string(b), "secret", "tokens are referenced, never written")
	require.Contains(t, string(b), "${SUPABASE_ACCESS_TOKEN}")
	require.True(t, strings.HasPrefix(res.Plan.ConfigFile, filepath.Join(home, "sessions", "cs_supa", "provision")))

	// without a cwd nothing runs
	none := resolve(t, home, "", "claude-code", "cs_none", skillFetcher())
	require.Nil(t, none.Meta)
	require.Nil(t, none.Plan)
}

func TestResolveApprovalFlow(t *testing.T) {
	home := t.TempDir()
	repo := writeTree(t, fixtures["playwright"])
	first := resolve(t, home, repo, "claude-code", "cs_a", skillFetcher())
	require.Equal(t, []string{"playwright", "webapp-testing"}, first.Meta.CapabilityIDs)
	require.Equal(t, []string{"playwright"}, first.Meta.AwaitingApproval, "deferred, not blocking")
	require.Equal(t, []string{"webapp-testing"}, first.Meta.Applied)
	b, err := os.ReadFile(filepath.Join(first.Plan.SkillsDir, "skills", "webapp-testing", "scripts", "run.py"))
	require.NoError(t, err)
	require.Equal(t, "print(1)\n", string(b))
	require.Empty(t, first.Plan.ConfigFile, "no MCP server before the approval")

	l := NewLedger(home, nil)
	list, err := l.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, []string{"cs_a"}, list[0].Sessions)
	_, err = l.Decide(messages.ApprovalDecision{ID: list[0].ID, Decision: "approve"})
	require.NoError(t, err)

	next := resolve(t, home, repo, "claude-code", "cs_b", skillFetcher())
	require.Empty(t, next.Meta.AwaitingApproval)
	require.Equal(t, []string{"playwright", "webapp-testing"}, next.Meta.Applied, "the next session picks it up")
	b, err = os.ReadFile(next.Plan.ConfigFile)
	require.NoError(t, err)
	require.Contains(t, string(b), "@playwright/mcp@0.0.86")

	// a pin bump in the owner's catalog asks again
	cat := Builtin()
	for i := range cat.Entries {
		if cat.Entries[i].ID == "playwright" {
			cat.Entries[i].Source.Version = "0.0.87"
			cat.Entries[i].MCP.Args = []string{"-y", "@playwright/mcp@0.0.87"}
		}
	}
	data, err := json.Marshal(cat)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, CatalogFile), data, 0o600))
	bumped := resolve(t, home, repo, "claude-code", "cs_c", skillFetcher())
	require.Equal(t, []string{"playwright"}, bumped.Meta.AwaitingApproval)
}

func TestPlanPerBackend(t *testing.T) {
	home := t.TempDir()
	repo := writeTree(t, fixtures["go-stripe-ci"])
	l := NewLedger(home, nil)
	_, _ = l.Check(entry(t, "postgres"), repo, "")
	_, err := l.Decide(messages.ApprovalDecision{ID: ApprovalID(entry(t, "postgres")), Decision: "approve"})
	require.NoError(t, err)
	want := []string{"github", "stripe", "postgres", "docker-compose", "lsp"}

	t.Run("claude-code", func(t *testing.T) {
		r := resolve(t, home, repo, "claude-code", "cs_cc", skillFetcher())
		require.Equal(t, want, r.Meta.Applied)
		require.Equal(t, filepath.Join(r.Dir, "claude", "mcp.json"), r.Plan.ConfigFile)
		require.FileExists(t, filepath.Join(r.Plan.SkillsDir, ".claude-plugin", "plugin.json"))
		require.FileExists(t, filepath.Join(r.Plan.SkillsDir, "skills", "lsp-analysis", "SKILL.md"))
		require.Contains(t, r.Plan.Instructions, "Docker Compose")
		require.ElementsMatch(t, []string{"GITHUB_MCP_TOKEN", "STRIPE_RESTRICTED_KEY", "DATABASE_URL"}, r.Plan.PassEnv)
		require.Len(t, r.Meta.TokenScopeNotes, 3)
		require.Contains(t, strings.Join(r.Meta.TokenScopeNotes, "\n"), "restricted test-mode key")
	})
	t.Run("codex", func(t *testing.T) {
		r := resolve(t, home, repo, "codex", "cs_cx", skillFetcher())
		require.Equal(t, want, r.Meta.Applied)
		b, err := os.ReadFile(r.Plan.ConfigFile)
		require.NoError(t, err)
		s := string(b)
		require.Contains(t, s, `[mcp_servers."postgres"]`)
		require.Contains(t, s, `env_vars = ["DATABASE_URL"]`)
		require.Contains(t, s, `bearer_token_env_var = "GITHUB_MCP_TOKEN"`)
		// codex finds skills natively in $CODEX_HOME/skills (its transport
		// links the plan's there): no instruction points at them
		require.Equal(t, filepath.Join(r.Dir, "codex", "skills"), r.Plan.SkillsDir)
		require.FileExists(t, filepath.Join(r.Plan.SkillsDir, "lsp-analysis", "SKILL.md"))
		require.NotContains(t, r.Plan.Instructions, "Skills for this project are in")
	})
	// the ACP agents take MCP servers in session/new; skills natively
	// where the CLI has a place the session's own config can name
	// (opencode's skills.paths), else through an instruction that points
	// at them (copilot, gemini, qwen)
	native := map[string]string{"opencode": "opencode/skills"}
	for _, b := range []string{"opencode", "gemini", "copilot", "qwen"} {
		t.Run(b, func(t *testing.T) {
			r := resolve(t, home, repo, b, "cs_"+b, skillFetcher())
			require.Equal(t, want, r.Meta.Applied)
			require.Empty(t, r.Meta.Ignored)
			require.Empty(t, r.Plan.ConfigFile, "ACP agents take the servers in session/new")
			require.Len(t, r.Plan.MCPServers, 3)
			require.FileExists(t, filepath.Join(r.Plan.SkillsDir, "lsp-analysis", "SKILL.md"))
			if in := native[b]; in != "" {
				require.Equal(t, filepath.Join(r.Dir, filepath.FromSlash(in)), r.Plan.SkillsDir)
				require.NotContains(t, r.Plan.Instructions, "Skills for this project are in", b+" finds its skills natively")
				require.False(t, slices.ContainsFunc(r.Meta.Notes, func(n string) bool { return strings.Contains(n, "not a native skill") }))
			} else {
				require.Contains(t, r.Plan.Instructions, "Skills for this project are in "+r.Plan.SkillsDir)
				require.Contains(t, r.Meta.Notes, "lsp: its skill is files the instructions point at, not a native skill: "+b+
					" has no skill location the session's own config can name", "the record says so")
			}
		})
	}
	t.Run("kilo", func(t *testing.T) {
		r := resolve(t, home, repo, "kilo", "cs_kilo", skillFetcher())
		require.Equal(t, filepath.Join(r.Dir, "kilo", "skills"), r.Plan.SkillsDir, "kilo's skills.paths, as opencode's")
		require.FileExists(t, filepath.Join(r.Plan.SkillsDir, "lsp-analysis", "SKILL.md"))
		require.NotContains(t, r.Plan.Instructions, "Skills for this project are in")
	})
	t.Run("droid", func(t *testing.T) {
		// droid has no MCP or skills flag: its config and skills are in a
		// per-session HOME under the plan's dir (never the repository)
		r := resolve(t, home, repo, "droid", "cs_droid", skillFetcher())
		require.Equal(t, want, r.Meta.Applied)
		require.Equal(t, filepath.Join(r.Dir, "droid-home"), r.Plan.Home)
		require.Equal(t, filepath.Join(r.Plan.Home, ".factory", "mcp.json"), r.Plan.ConfigFile)
		b, err := os.ReadFile(r.Plan.ConfigFile)
		require.NoError(t, err)
		var cfg struct {
			MCPServers map[string]map[string]any `json:"mcpServers"`
		}
		require.NoError(t, json.Unmarshal(b, &cfg))
		require.Len(t, cfg.MCPServers, 3)
		require.Equal(t, "stdio", cfg.MCPServers["postgres"]["type"])
		require.NotContains(t, string(b), "ghp_", "a token is named, never written")
		require.Equal(t, filepath.Join(r.Plan.Home, ".factory", "skills"), r.Plan.SkillsDir)
		require.FileExists(t, filepath.Join(r.Plan.SkillsDir, "lsp-analysis", "SKILL.md"))
		require.NotContains(t, r.Plan.Instructions, "Skills for this project are in", "droid finds its skills natively")
		require.NoDirExists(t, filepath.Join(repo, ".factory"))
	})
	t.Run("skill not fetched", func(t *testing.T) {
		r := resolve(t, home, repo, "claude-code", "cs_nofetch", nil)
		require.Contains(t, r.Meta.Ignored, "lsp")
		require.True(t, slices.ContainsFunc(r.Meta.Notes, func(n string) bool { return strings.HasPrefix(n, "lsp: skill not fetched") }))
	})
}

func TestCleanupKeepsManifest(t *testing.T) {
	home := t.TempDir()
	r := resolve(t, home, writeTree(t, fixtures["go-stripe-ci"]), "claude-code", "cs_clean", skillFetcher())
	require.NotNil(t, r.Plan)
	p, err := WriteManifest(r.Dir, Manifest{SessionID: "cs_clean", Brief: "do it", Backend: "claude-code"}, r.Plan.Files)
	require.NoError(t, err)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	m, err := ReadManifest(r.Dir)
	require.NoError(t, err)
	require.Len(t, m.Files, len(r.Plan.Files))
	mcp, _ := os.ReadFile(r.Plan.ConfigFile)
	for _, f := range m.Files {
		if f.Path == "claude/mcp.json" {
			require.Equal(t, SHA256Hex(mcp), f.SHA256)
		}
	}
	require.Equal(t, SHA256Hex([]byte("do it")), m.BriefSHA256)
	// written once: a second write keeps the first
	_, err = WriteManifest(r.Dir, Manifest{SessionID: "cs_clean", Brief: "other"}, nil)
	require.NoError(t, err)
	m2, _ := ReadManifest(r.Dir)
	require.Equal(t, "do it", m2.Brief)

	require.NoError(t, Cleanup(r.Dir))
	ents, err := os.ReadDir(r.Dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.Equal(t, ManifestFile, ents[0].Name())
	require.NoError(t, Cleanup(filepath.Join(home, "missing")))
}

// BenchmarkResolve is the pipeline's cost on a session start: a plain
// repository (detection from the profile cache, nothing provisioned) and
// a Supabase one (a plan written).
func BenchmarkResolve(b *testing.B) {
	for _, name := range []string{"plain", "supabase"} {
		b.Run(name, func(b *testing.B) {
			home := b.TempDir()
			dir := b.TempDir()
			for n, data := range fixtures[name] {
				p := filepath.Join(dir, filepath.FromSlash(n))
				_ = os.MkdirAll(filepath.Dir(p), 0o755)
				_ = os.WriteFile(p, []byte(data), 0o644)
			}
			c := &Curator{Home: home}
			i := 0
			for b.Loop() {
				i++
				c.Resolve(context.Background(), Request{SessionID: "cs_" + strings.Repeat("a", 8) + string(rune('a'+i%26)), Cwd: dir, Backend: "claude-code"})
			}
		})
	}
}

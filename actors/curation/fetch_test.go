package curation

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

const pin = "0123456789abcdef0123456789abcdef01234567"

// node is one entry of a fake repository tree at pin.
type node struct {
	typ  string // file | dir | symlink | submodule
	data string
}

// contentsServer serves the GitHub Contents API shape for a tree, only at
// ref=pin (any other ref is a 404: the fetcher must never ask for a branch).
func contentsServer(t *testing.T, tree map[string]node) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Query().Get("ref") != pin {
			http.NotFound(w, r)
			return
		}
		p := strings.TrimPrefix(r.URL.Path, "/repos/o/r/contents/")
		p = strings.TrimSuffix(p, "/")
		if n, ok := tree[p]; ok && n.typ != "dir" {
			_ = json.NewEncoder(w).Encode(map[string]any{"type": n.typ, "name": path.Base(p), "path": p, "size": len(n.data),
				"encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte(n.data))})
			return
		}
		var list []map[string]any
		for k, n := range tree {
			if path.Dir(k) == p || (p == "" && !strings.Contains(k, "/")) {
				list = append(list, map[string]any{"type": n.typ, "name": path.Base(k), "path": k, "size": len(n.data)})
			}
		}
		if list == nil {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestGitHubFetcherGoodTree(t *testing.T) {
	srv, _ := contentsServer(t, map[string]node{
		"s":                {typ: "dir"},
		"s/SKILL.md":       {typ: "file", data: "---\nname: s\n---\nhi\n"},
		"s/ref":            {typ: "dir"},
		"s/ref/guide.md":   {typ: "file", data: "guide ü\n"},
		"other/SKILL.md":   {typ: "file", data: "not ours"},
		"s/ref/deeper":     {typ: "dir"},
		"s/ref/deeper/x.y": {typ: "file", data: "x"},
	})
	f := &GitHubFetcher{BaseURL: srv.URL}
	files, err := f.FetchSkill(context.Background(), "o/r", pin, "s")
	require.NoError(t, err)
	var names []string
	for _, fl := range files {
		names = append(names, fl.Path)
	}
	require.Equal(t, []string{"SKILL.md", "ref/deeper/x.y", "ref/guide.md"}, names)
	require.Equal(t, "guide ü\n", string(files[2].Data))
}

func TestGitHubFetcherRefusesHostileTrees(t *testing.T) {
	big := strings.Repeat("a", MaxSkillBytes/2+1)
	for name, tc := range map[string]struct {
		tree map[string]node
		want string
	}{
		"symlink":      {map[string]node{"s/SKILL.md": {typ: "file", data: "x"}, "s/link": {typ: "symlink", data: "/etc/passwd"}}, "symlink"},
		"submodule":    {map[string]node{"s/SKILL.md": {typ: "file", data: "x"}, "s/sub": {typ: "submodule"}}, "not a file or directory"},
		"non-utf8":     {map[string]node{"s/SKILL.md": {typ: "file", data: "ok"}, "s/bin": {typ: "file", data: "\xff\xfe\x00"}}, "not UTF-8"},
		"odd name":     {map[string]node{"s/SKILL.md": {typ: "file", data: "x"}, "s/a b.md": {typ: "file", data: "x"}}, "outside [A-Za-z0-9._/-]"},
		"dotdot name":  {map[string]node{"s/SKILL.md": {typ: "file", data: "x"}, "s/..": {typ: "file", data: "x"}}, "outside [A-Za-z0-9._/-]"},
		"too large":    {map[string]node{"s/SKILL.md": {typ: "file", data: big}, "s/b.md": {typ: "file", data: big}}, "larger than 65536"},
		"no SKILL.md":  {map[string]node{"s/README.md": {typ: "file", data: "x"}}, "no SKILL.md"},
		"missing path": {map[string]node{"t/SKILL.md": {typ: "file", data: "x"}}, "answered 404"},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := contentsServer(t, tc.tree)
			f := &GitHubFetcher{BaseURL: srv.URL}
			_, err := f.FetchSkill(context.Background(), "o/r", pin, "s")
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			var me *messages.Error
			require.ErrorAs(t, err, &me)
		})
	}
	t.Run("not a pin", func(t *testing.T) {
		f := &GitHubFetcher{BaseURL: "http://127.0.0.1:1"}
		_, err := f.FetchSkill(context.Background(), "o/r", "main", "s")
		require.ErrorContains(t, err, "full commit sha")
		_, err = f.FetchSkill(context.Background(), "o/r", pin, "../x")
		require.ErrorContains(t, err, "outside")
	})
	t.Run("a huge listing", func(t *testing.T) {
		tree := map[string]node{"s/SKILL.md": {typ: "file", data: "x"}}
		for i := range maxSkillFiles + 1 {
			tree["s/f"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))] = node{typ: "file", data: "x"}
		}
		srv, _ := contentsServer(t, tree)
		_, err := (&GitHubFetcher{BaseURL: srv.URL}).FetchSkill(context.Background(), "o/r", pin, "s")
		require.ErrorContains(t, err, "more than")
	})
}

func TestCachedFetcher(t *testing.T) {
	srv, hits := contentsServer(t, map[string]node{"s/SKILL.md": {typ: "file", data: "x"}})
	c := &CachedFetcher{Dir: t.TempDir(), Next: &GitHubFetcher{BaseURL: srv.URL}, FailTTL: time.Minute}
	_, err := c.FetchSkill(context.Background(), "o/r", pin, "s")
	require.NoError(t, err)
	n := hits.Load()
	files, err := c.FetchSkill(context.Background(), "o/r", pin, "s")
	require.NoError(t, err)
	require.Equal(t, n, hits.Load(), "a pinned skill is fetched once")
	require.Equal(t, "x", string(files[0].Data))
	// a failure is remembered for FailTTL
	_, err = c.FetchSkill(context.Background(), "o/r", pin, "missing")
	require.Error(t, err)
	n = hits.Load()
	_, err = c.FetchSkill(context.Background(), "o/r", pin, "missing")
	require.Error(t, err)
	require.Equal(t, n, hits.Load())
}

func TestRefresherReportsUpdatesAsData(t *testing.T) {
	newSHA := strings.Repeat("b", 40)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/@playwright/mcp":
			_, _ = w.Write([]byte(`{"dist-tags":{"latest":"0.0.99"}}`))
		case r.URL.Path == "/@modelcontextprotocol/server-postgres":
			_, _ = w.Write([]byte(`{"dist-tags":{"latest":"0.6.2"}}`))
		case r.URL.Path == "/repos/lsp-client/lsp-skill/commits":
			_, _ = w.Write([]byte(`[{"sha":"` + newSHA + `"}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := Builtin()
	before := c.Digest()
	ups := (&Refresher{NPMBase: srv.URL, GitHubBase: srv.URL}).Check(context.Background(), c)
	require.Len(t, ups, len(c.Entries))
	byID := map[string]Update{}
	for _, u := range ups {
		byID[u.ID] = u
	}
	require.True(t, byID["playwright"].Available)
	require.Equal(t, "0.0.99", byID["playwright"].Latest)
	require.False(t, byID["postgres"].Available)
	require.True(t, byID["lsp"].Available)
	require.Equal(t, newSHA, byID["lsp"].Latest)
	require.NotEmpty(t, byID["supabase"].Error, "a failed probe is reported, not fatal")
	require.False(t, byID["supabase"].Available)
	require.Equal(t, before, c.Digest(), "the check never bumps a pin")
	require.Equal(t, Builtin().Digest(), c.Digest())
}

func TestRefreshSchedule(t *testing.T) {
	home := t.TempDir()
	now := time.Unix(1700000000, 0)
	require.Equal(t, now.Add(RefreshFirstDelay), NextRefresh(home, now), "a fresh home waits before its first probe")
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	rep, err := RunRefresh(context.Background(), home, &Refresher{NPMBase: srv.URL, GitHubBase: srv.URL}, now)
	require.NoError(t, err)
	require.Len(t, rep.Updates, len(Builtin().Entries))
	require.Equal(t, now.Add(RefreshEvery).UTC(), NextRefresh(home, now.Add(time.Hour)).UTC())
}

package curation

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// MaxSkillBytes caps one skill's files together (seed 002's SKILL_BYTES).
const MaxSkillBytes = 64 << 10

// maxSkillFiles and maxSkillDepth bound the walk of a hostile tree.
const (
	maxSkillFiles = 64
	maxSkillDepth = 4
	maxListing    = 256 << 10 // one directory listing's JSON
)

// SkillFile is one file of a skill: a slash path inside the skill and its
// bytes (UTF-8 text).
type SkillFile struct {
	Path string
	Data []byte
}

// SkillFetcher fetches the files of a skill directory of a repository at a
// commit.
type SkillFetcher interface {
	FetchSkill(ctx context.Context, repo, commit, dir string) ([]SkillFile, error)
}

var safePath = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// safeName reports whether a path uses only [A-Za-z0-9._/-] and no . or
// .. element.
func safeName(p string) bool {
	if !safePath.MatchString(p) {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// GitHubFetcher walks the GitHub Contents API
// (GET {base}/repos/{owner}/{repo}/contents/{path}?ref={sha}) pinned to the
// exact commit sha. It refuses symlinks and submodules, names outside
// [A-Za-z0-9._/-], non-UTF-8 content, and skills over MaxSkillBytes or
// maxSkillFiles; a skill needs a SKILL.md at its root.
type GitHubFetcher struct {
	// BaseURL is the API root; "" is https://api.github.com (tests point
	// it at a loopback server).
	BaseURL string
	Client  *http.Client
	// Token, when set, is sent as a bearer token (rate limits).
	Token string
}

type contentsEntry struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

func skillRefused(format string, args ...any) error {
	return messages.Errorf(messages.CodeInvalid, "skill", format, args...)
}

// FetchSkill fetches dir of repo at commit.
func (g *GitHubFetcher) FetchSkill(ctx context.Context, repo, commit, dir string) ([]SkillFile, error) {
	if !repoPattern.MatchString(repo) || !shaPattern.MatchString(commit) {
		return nil, skillRefused("a skill is fetched from owner/name at a full commit sha, not %s@%s", repo, commit)
	}
	if dir != "" && !safeName(dir) {
		return nil, skillRefused("skill path %q is outside [A-Za-z0-9._/-]", dir)
	}
	var files []SkillFile
	total := 0
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		if depth > maxSkillDepth {
			return skillRefused("skill %s nests deeper than %d directories", dir, maxSkillDepth)
		}
		full := path.Join(dir, rel)
		var listing json.RawMessage
		if err := g.get(ctx, repo, full, commit, &listing); err != nil {
			return err
		}
		var ents []contentsEntry
		if err := json.Unmarshal(listing, &ents); err != nil {
			return skillRefused("%s/%s is not a directory listing", repo, full)
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		for _, e := range ents {
			name := path.Join(rel, e.Name)
			if !safeName(name) || strings.Contains(e.Name, "/") {
				return skillRefused("skill file name %q is outside [A-Za-z0-9._/-]", name)
			}
			switch e.Type {
			case "dir":
				if err := walk(name, depth+1); err != nil {
					return err
				}
			case "file":
				if len(files) >= maxSkillFiles {
					return skillRefused("skill has more than %d files", maxSkillFiles)
				}
				if e.Size < 0 || total+int(min(e.Size, MaxSkillBytes+1)) > MaxSkillBytes {
					return skillRefused("skill is larger than %d bytes", MaxSkillBytes)
				}
				var f contentsEntry
				if err := g.get(ctx, repo, path.Join(dir, name), commit, &f); err != nil {
					return err
				}
				if f.Type != "file" || f.Encoding != "base64" {
					return skillRefused("skill file %s is a %s (%s), not a plain file", name, f.Type, f.Encoding)
				}
				data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(f.Content, "\n", ""))
				if err != nil {
					return skillRefused("skill file %s: bad base64", name)
				}
				total += len(data)
				if total > MaxSkillBytes {
					return skillRefused("skill is larger than %d bytes", MaxSkillBytes)
				}
				if !utf8.Valid(data) {
					return skillRefused("skill file %s is not UTF-8 text", name)
				}
				files = append(files, SkillFile{Path: name, Data: data})
			case "symlink":
				return skillRefused("skill file %s is a symlink", name)
			default:
				return skillRefused("skill entry %s is a %q, not a file or directory", name, e.Type)
			}
		}
		return nil
	}
	if err := walk("", 0); err != nil {
		return nil, err
	}
	if !hasSkillMD(files) {
		return nil, skillRefused("%s@%s:%s has no SKILL.md", repo, commit[:12], dir)
	}
	return files, nil
}

func hasSkillMD(files []SkillFile) bool {
	for _, f := range files {
		if f.Path == "SKILL.md" {
			return true
		}
	}
	return false
}

// get reads one Contents API answer (bounded) into v.
func (g *GitHubFetcher) get(ctx context.Context, repo, p, ref string, v any) error {
	base := strings.TrimRight(g.BaseURL, "/")
	if base == "" {
		base = "https://api.github.com"
	}
	u := base + "/repos/" + repo + "/contents/" + (&url.URL{Path: p}).EscapedPath() + "?ref=" + url.QueryEscape(ref)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	if g.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.Token)
	}
	hc := g.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return messages.Wrap(messages.CodeUnavailable, "skill", err, "cannot reach "+base+": "+err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListing+MaxSkillBytes*2))
	if err != nil {
		return messages.Wrap(messages.CodeUnavailable, "skill", err, "reading "+u)
	}
	if resp.StatusCode != http.StatusOK {
		return messages.Errorf(messages.CodeUnavailable, "skill", "%s answered %s for %s", base, resp.Status, p)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return skillRefused("%s/%s: not a Contents API answer", repo, p)
	}
	return nil
}

// CachedFetcher keeps fetched skills under a directory: a pinned commit's
// files never change, so one fetch serves every later session. A failure
// is remembered for FailTTL so a session start without a network is not
// slowed by every retry.
type CachedFetcher struct {
	Dir     string
	Next    SkillFetcher
	FailTTL time.Duration
	Now     func() time.Time

	mu    sync.Mutex
	fails map[string]failure
}

type failure struct {
	err error
	at  time.Time
}

// FetchSkill answers from the cache, else from Next.
func (c *CachedFetcher) FetchSkill(ctx context.Context, repo, commit, dir string) ([]SkillFile, error) {
	key := strings.ReplaceAll(repo, "/", "+") + "@" + commit + "+" + strings.ReplaceAll(dir, "/", "+")
	cacheFile := filepath.Join(c.Dir, key+".json")
	if b, err := os.ReadFile(cacheFile); err == nil {
		var files []SkillFile
		if json.Unmarshal(b, &files) == nil && hasSkillMD(files) {
			return files, nil
		}
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	if f, ok := c.fails[key]; ok && now().Sub(f.at) < c.FailTTL {
		c.mu.Unlock()
		return nil, f.err
	}
	c.mu.Unlock()
	files, err := c.Next.FetchSkill(ctx, repo, commit, dir)
	if err != nil {
		c.mu.Lock()
		if c.fails == nil {
			c.fails = map[string]failure{}
		}
		c.fails[key] = failure{err: err, at: now()}
		c.mu.Unlock()
		return nil, err
	}
	if b, err := json.Marshal(files); err == nil {
		_ = writeAtomic(cacheFile, b, 0o600)
	}
	return files, nil
}

// String names the fetcher in notes.
func (g *GitHubFetcher) String() string { return fmt.Sprintf("GitHub contents API at %s", g.BaseURL) }

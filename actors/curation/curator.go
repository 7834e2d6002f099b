package curation

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// SkillCacheDir is where fetched skills are kept, in the home.
const SkillCacheDir = "skill-cache"

// Curator runs the pipeline for one session start: detect the project's
// capabilities, gate each on trust, lay out the backend's plan under the
// session's provision directory, and say what it did for the record.
// It never fails a start: every problem is a note on the record.
type Curator struct {
	Home string
	// Fetcher fetches skills; nil leaves every skill out (with a note).
	Fetcher SkillFetcher
	// FetchTimeout bounds one skill's fetch (default 10 s).
	FetchTimeout time.Duration
	Now          func() time.Time
	Log          *slog.Logger

	// the catalog as last loaded, and the override file's size and mtime
	// then: a start reparses it only when it changed
	mu       sync.Mutex
	cat      *Catalog
	catStamp string
}

// catalog is the home's catalog, reloaded when capabilities.json changed.
// The value is shared and never modified.
func (c *Curator) catalog() (*Catalog, error) {
	stamp := "builtin"
	if fi, err := os.Stat(filepath.Join(c.Home, CatalogFile)); err == nil {
		stamp = fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cat != nil && c.catStamp == stamp {
		return c.cat, nil
	}
	cat, err := LoadCatalog(c.Home)
	if err != nil {
		return nil, err
	}
	c.cat, c.catStamp = cat, stamp
	return cat, nil
}

// NewCurator is the default curator of a home: skills from the cache in
// <home>/skill-cache, and on a miss from GitHub's Contents API at
// githubAPI ("" is api.github.com) when fetch is on. With fetch off a
// skill missing from the cache is left out with a note: a session start
// never reaches a host the owner did not allow.
func NewCurator(home string, log *slog.Logger, fetch bool, githubAPI string) *Curator {
	var next SkillFetcher = offlineFetcher{}
	if fetch {
		next = &GitHubFetcher{BaseURL: githubAPI}
	}
	return &Curator{Home: home, Log: log,
		Fetcher: &CachedFetcher{Dir: filepath.Join(home, SkillCacheDir), Next: next, FailTTL: 10 * time.Minute}}
}

// offlineFetcher answers every cache miss with why nothing was fetched.
type offlineFetcher struct{}

func (offlineFetcher) FetchSkill(context.Context, string, string, string) ([]SkillFile, error) {
	return nil, messages.Errorf(messages.CodeUnavailable, "skill",
		"not in the skill cache, and fetching is off (set capabilities.fetch: true or CODESESSION_CAPABILITIES_FETCH=1)")
}

// Request is one session start.
type Request struct {
	SessionID string
	Cwd       string
	Backend   string
}

// Result is the plan (nil when nothing is provisioned) and the record's
// view of it.
type Result struct {
	Plan *transports.Provision
	Meta *messages.Provision
	Dir  string
}

func (c *Curator) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Curator) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// Resolve runs the pipeline. With no cwd it does nothing (curation is per
// project; there is none to look at).
func (c *Curator) Resolve(ctx context.Context, req Request) Result {
	res := Result{Dir: ProvisionDir(c.Home, req.SessionID)}
	if req.Cwd == "" || c.Home == "" {
		return res
	}
	meta := &messages.Provision{CapabilityIDs: []string{}, Tiers: map[string]string{}}
	res.Meta = meta
	note := func(format string, args ...any) {
		meta.Notes = append(meta.Notes, fmt.Sprintf(format, args...))
	}
	cat, err := c.catalog()
	if err != nil {
		note("capability catalog not loaded, nothing provisioned: %s", messages.AsError("capabilities", err).Message)
		c.log().Warn("curation: catalog not loaded", "err", err)
		return res
	}
	prof, _, err := DetectProject(c.Home, req.Cwd, cat, c.now())
	if err != nil {
		note("project not read, nothing detected: %v", err)
		return res
	}
	ledger := NewLedger(c.Home, c.Now)
	var chosen []Chosen
	ignore := func(id, why string) {
		meta.Ignored = append(meta.Ignored, id)
		note("%s: %s", id, why)
	}
	for _, id := range prof.Detected {
		e, ok := cat.Lookup(id)
		if !ok {
			continue
		}
		meta.CapabilityIDs = append(meta.CapabilityIDs, id)
		meta.Tiers[id] = e.Tier
		spec := e.For(req.Backend)
		if spec.Skip {
			ignore(id, "not provisioned for "+req.Backend)
			continue
		}
		gate, err := ledger.Check(e, req.Cwd, req.SessionID)
		switch {
		case err != nil:
			ignore(id, "approval ledger unreadable: "+messages.AsError("approvals", err).Message)
			continue
		case gate == GateAwaiting:
			meta.AwaitingApproval = append(meta.AwaitingApproval, id)
			note("%s: awaiting approval (codesession approvals approve %s)", id, ApprovalID(e))
			continue
		case gate == GateDenied:
			ignore(id, "denied by the owner at "+e.Source.Identity())
			continue
		}
		ch := Chosen{Entry: e, Spec: spec}
		if spec.Skill != nil {
			files, err := c.fetch(ctx, e, spec.Skill)
			if err != nil {
				if spec.MCP == nil && spec.Instructions == "" {
					ignore(id, "skill not fetched: "+messages.AsError("skill", err).Message)
					continue
				}
				note("%s: skill not fetched: %s", id, messages.AsError("skill", err).Message)
			}
			ch.Skill = files
		}
		chosen = append(chosen, ch)
	}
	plan, ignored, err := BuildPlan(req.Backend, res.Dir, chosen)
	if err != nil {
		note("provisioning failed, nothing provisioned: %v", err)
		_ = Cleanup(res.Dir)
		for _, ch := range chosen {
			meta.Ignored = append(meta.Ignored, ch.Entry.ID)
		}
		return res
	}
	ids := make([]string, 0, len(ignored))
	for id := range ignored {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ignore(id, ignored[id])
	}
	for _, ch := range chosen {
		if _, out := ignored[ch.Entry.ID]; out {
			continue
		}
		meta.Applied = append(meta.Applied, ch.Entry.ID)
		if ch.Spec.Skill != nil && len(ch.Skill) > 0 && !NativeSkills(req.Backend) {
			note("%s: its skill is files the instructions point at, not a native skill: %s has no skill location the session's own config can name", ch.Entry.ID, req.Backend)
		}
		if m := ch.Spec.MCP; m != nil && m.AuthEnv != "" {
			meta.TokenScopeNotes = append(meta.TokenScopeNotes, tokenScopeNote(ch.Entry, m.AuthEnv))
		}
	}
	if !plan.Empty() {
		res.Plan = plan
	}
	return res
}

// tokenScopeNote is the caveat for a capability that binds a token:
// nothing can enforce the token's scope, so the owner must.
func tokenScopeNote(e Entry, env string) string {
	what := "read-only"
	if e.ID == "stripe" {
		what = "a restricted test-mode key, never a live secret"
	}
	return fmt.Sprintf("%s: the token in $%s must be %s; codesession cannot enforce its scope", e.ID, env, what)
}

func (c *Curator) fetch(ctx context.Context, e Entry, sk *SkillSpec) ([]SkillFile, error) {
	if c.Fetcher == nil {
		return nil, messages.Errorf(messages.CodeUnavailable, "skill", "no skill fetcher configured")
	}
	d := c.FetchTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Fetcher.FetchSkill(ctx, e.Source.Repo, e.Source.Commit, sk.Path)
}

// Provisioned lists the ids a plan carries (tests, logs).
func (r Result) Provisioned() []string {
	if r.Meta == nil {
		return nil
	}
	return slices.Clone(r.Meta.Applied)
}

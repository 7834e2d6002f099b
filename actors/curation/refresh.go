package curation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Update is what the refresh check found for one entry: the pin it has
// and the newest upstream one (Available when they differ), or why it
// could not tell. It is data: nothing ever bumps a pin but a reviewed
// catalog edit.
type Update struct {
	ID        string `json:"id"`
	Identity  string `json:"identity"`
	Current   string `json:"current"`
	Latest    string `json:"latest,omitempty"`
	Available bool   `json:"available"`
	Error     string `json:"error,omitempty"`
}

// Refresher probes upstream for newer pins: npm's registry for a
// package's latest version, GitHub's API for a repository's newest commit
// on its default branch. Base URLs are injectable (tests use loopback).
type Refresher struct {
	NPMBase    string // "" is https://registry.npmjs.org
	GitHubBase string // "" is https://api.github.com
	Client     *http.Client
	Token      string
}

// maxProbeBytes bounds one probe's answer (an npm package document can be
// megabytes; the abbreviated form is asked for).
const maxProbeBytes = 8 << 20

// Check probes every entry of c; one failing probe is an Update with its
// Error, never a failed check.
func (r *Refresher) Check(ctx context.Context, c *Catalog) []Update {
	out := make([]Update, 0, len(c.Entries))
	for _, e := range c.Entries {
		u := Update{ID: e.ID, Identity: e.Source.Identity()}
		var err error
		if e.Source.NPM != "" {
			u.Current = e.Source.Version
			u.Latest, err = r.npmLatest(ctx, e.Source.NPM)
		} else {
			u.Current = e.Source.Commit
			u.Latest, err = r.githubHead(ctx, e.Source.Repo)
		}
		if err != nil {
			u.Error = err.Error()
		}
		u.Available = u.Latest != "" && u.Latest != u.Current
		out = append(out, u)
	}
	return out
}

func (r *Refresher) getJSON(ctx context.Context, u, accept string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	if r.Token != "" && strings.Contains(accept, "github") {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	hc := r.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxProbeBytes)).Decode(v)
}

func (r *Refresher) npmLatest(ctx context.Context, pkg string) (string, error) {
	base := strings.TrimRight(r.NPMBase, "/")
	if base == "" {
		base = "https://registry.npmjs.org"
	}
	var doc struct {
		DistTags map[string]string `json:"dist-tags"`
	}
	if err := r.getJSON(ctx, base+"/"+strings.Replace(url.PathEscape(pkg), "%40", "@", 1), "application/vnd.npm.install-v1+json", &doc); err != nil {
		return "", err
	}
	if v := doc.DistTags["latest"]; v != "" {
		return v, nil
	}
	return "", fmt.Errorf("npm %s has no latest tag", pkg)
}

func (r *Refresher) githubHead(ctx context.Context, repo string) (string, error) {
	base := strings.TrimRight(r.GitHubBase, "/")
	if base == "" {
		base = "https://api.github.com"
	}
	var commits []struct {
		SHA string `json:"sha"`
	}
	if err := r.getJSON(ctx, base+"/repos/"+repo+"/commits?per_page=1", "application/vnd.github+json", &commits); err != nil {
		return "", err
	}
	if len(commits) == 0 || !shaPattern.MatchString(commits[0].SHA) {
		return "", fmt.Errorf("github %s: no commit sha in the answer", repo)
	}
	return commits[0].SHA, nil
}

// UpdatesFile is the last refresh report, in the home.
const UpdatesFile = "capability-updates.json"

// RefreshEvery is how often the daemon checks the catalog's pins; the
// first check of a home that has no report waits RefreshFirstDelay, so a
// short-lived daemon (a test, a demo) never probes the network.
const (
	RefreshEvery      = 7 * 24 * time.Hour
	RefreshFirstDelay = time.Hour
)

// Report is the refresh job's output: data for the owner, never a pin
// change.
type Report struct {
	At      time.Time `json:"at"`
	Updates []Update  `json:"updates"`
}

// NextRefresh is when the job should next run: a week after the last
// report, or RefreshFirstDelay from now when there is none.
func NextRefresh(home string, now time.Time) time.Time {
	b, err := os.ReadFile(filepath.Join(home, UpdatesFile))
	var r Report
	if err != nil || json.Unmarshal(b, &r) != nil || r.At.IsZero() {
		return now.Add(RefreshFirstDelay)
	}
	return r.At.Add(RefreshEvery)
}

// RunRefresh checks the home's catalog once and writes the report.
func RunRefresh(ctx context.Context, home string, r *Refresher, now time.Time) (Report, error) {
	cat, err := LoadCatalog(home)
	if err != nil {
		return Report{}, err
	}
	rep := Report{At: now.UTC(), Updates: r.Check(ctx, cat)}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, err
	}
	return rep, writeAtomic(filepath.Join(home, UpdatesFile), b, 0o600)
}

// RefreshJob runs RunRefresh on the weekly schedule until ctx ends,
// logging each available update once per report (the owner's notice).
func RefreshJob(ctx context.Context, home string, r *Refresher, log *slog.Logger) {
	for {
		wait := time.Until(NextRefresh(home, time.Now()))
		t := time.NewTimer(max(wait, time.Minute))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		rep, err := RunRefresh(ctx, home, r, time.Now())
		if err != nil {
			log.Warn("capabilities: the refresh check failed", "err", err)
			// retry a day later, not in a loop
			_ = writeAtomic(filepath.Join(home, UpdatesFile), mustJSON(Report{At: time.Now().Add(-RefreshEvery + 24*time.Hour).UTC()}), 0o600)
			continue
		}
		for _, u := range rep.Updates {
			if u.Available {
				log.Warn("capabilities: a newer upstream pin is available (edit the catalog to bump it; nothing changed)",
					"capability", u.ID, "pinned", u.Current, "latest", u.Latest)
			}
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

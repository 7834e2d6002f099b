package curation

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
)

//go:embed catalog.json
var builtinCatalog []byte

// CatalogFile is the owner's override of the built-in catalog, in the home.
const CatalogFile = "capabilities.json"

// maxCatalogBytes bounds the override file.
const maxCatalogBytes = 1 << 20

// Catalog is the capabilities codesession knows how to provision: data,
// never code. Entries are in catalog order.
type Catalog struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Entry is one capability.
type Entry struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Tier is one of messages.Tier*.
	Tier   string `json:"tier"`
	Source Source `json:"source"`
	// Detect: the capability is detected when any rule matches.
	Detect []Rule `json:"detect"`
	// MCP is the server the capability provisions, if any.
	MCP *MCPSpec `json:"mcp,omitempty"`
	// Skill is the pinned skill the capability provisions, if any; its
	// files come from Source.Repo at Source.Commit.
	Skill *SkillSpec `json:"skill,omitempty"`
	// Instructions are appended to the agent's system prompt.
	Instructions string `json:"instructions,omitempty"`
	// Backends overrides the specs for one backend id; a Skip there means
	// the backend does not get the capability.
	Backends map[string]BackendSpec `json:"backends,omitempty"`
}

// Source is an entry's pinned identity: an npm package at an exact
// version, or a GitHub repository at a full commit sha. Never a branch or
// a range: what was approved is what runs.
type Source struct {
	NPM     string `json:"npm,omitempty"`
	Version string `json:"version,omitempty"`
	Repo    string `json:"repo,omitempty"`
	Commit  string `json:"commit,omitempty"`
}

// Identity is the pinned identity as one string: npm:<pkg>@<version> or
// github:<owner>/<repo>@<sha>.
func (s Source) Identity() string {
	if s.NPM != "" {
		return "npm:" + s.NPM + "@" + s.Version
	}
	return "github:" + s.Repo + "@" + s.Commit
}

// Rule is one detection rule. Kind says which fields count:
//
//	file-exists      Path
//	package-dep      Name (package.json dependencies, go.mod require, pyproject/requirements)
//	file-content     Path, Pattern (a regexp over the file's first bytes)
//	workflow-action  Pattern (over the `uses:` values of .github/workflows/*.y*ml)
//	compose-service  Pattern (over the `image:` values of the compose files)
type Rule struct {
	Kind    string `json:"kind"`
	Path    string `json:"path,omitempty"`
	Name    string `json:"name,omitempty"`
	Pattern string `json:"pattern,omitempty"`

	re *regexp.Regexp
}

// Rule kinds.
const (
	RuleFileExists     = "file-exists"
	RulePackageDep     = "package-dep"
	RuleFileContent    = "file-content"
	RuleWorkflowAction = "workflow-action"
	RuleComposeService = "compose-service"
)

// MCPSpec is an MCP server: a local command (stdio) or a vendor URL.
type MCPSpec struct {
	Name    string   `json:"name"`
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	URL     string   `json:"url,omitempty"`
	// AuthEnv names the daemon environment variable holding the token the
	// server needs (a bearer token for a remote one, in the process
	// environment for a local one). It is passed by name, never written to
	// a file; its scope is the owner's to restrict.
	AuthEnv string `json:"authEnv,omitempty"`
}

// SkillSpec is a skill: the directory Path of Source.Repo at Source.Commit
// holding a SKILL.md, provisioned under Name.
type SkillSpec struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// BackendSpec overrides an entry's specs for one backend.
type BackendSpec struct {
	Skip         bool       `json:"skip,omitempty"`
	MCP          *MCPSpec   `json:"mcp,omitempty"`
	Skill        *SkillSpec `json:"skill,omitempty"`
	Instructions string     `json:"instructions,omitempty"`
}

// For returns the entry's specs for a backend: its override where it has
// one, else the entry's own.
func (e Entry) For(backend string) BackendSpec {
	spec := BackendSpec{MCP: e.MCP, Skill: e.Skill, Instructions: e.Instructions}
	if o, ok := e.Backends[backend]; ok {
		if o.Skip {
			return BackendSpec{Skip: true}
		}
		if o.MCP != nil {
			spec.MCP = o.MCP
		}
		if o.Skill != nil {
			spec.Skill = o.Skill
		}
		if o.Instructions != "" {
			spec.Instructions = o.Instructions
		}
	}
	return spec
}

var (
	idPattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	shaPattern     = regexp.MustCompile(`^[0-9a-f]{40}$`)
	semverPattern  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	npmPattern     = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`)
	repoPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	envPattern     = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	skillNameRegex = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// maxPatternLen bounds a rule's regexp (Go's regexps run in linear time;
// this bounds their compiled size).
const maxPatternLen = 512

// catalogError is the typed error of a bad catalog, naming the entry and
// field.
func catalogError(field, format string, args ...any) error {
	return messages.FieldError("capabilities", field, format, args...)
}

// Validate checks every entry: ids unique, tiers known, pins exact (an npm
// version, a full commit sha — never a branch), rules well formed, a
// local MCP command that names its pinned package, and specs that fit
// the tier.
func (c *Catalog) Validate() error {
	if c.Version != 1 {
		return catalogError("version", "unsupported catalog version %d (want 1)", c.Version)
	}
	seen := map[string]bool{}
	for i := range c.Entries {
		e := &c.Entries[i]
		at := fmt.Sprintf("entries[%d]", i)
		if !idPattern.MatchString(e.ID) {
			return catalogError(at+".id", "%q is not a capability id ([a-z0-9-], at most 40)", e.ID)
		}
		at = "entries." + e.ID
		if seen[e.ID] {
			return catalogError(at, "duplicate id")
		}
		seen[e.ID] = true
		if !messages.ValidTier(e.Tier) {
			return catalogError(at+".tier", "unknown tier %q (T0, T1, T2R, T2, T3)", e.Tier)
		}
		if err := e.Source.validate(at + ".source"); err != nil {
			return err
		}
		if len(e.Detect) == 0 {
			return catalogError(at+".detect", "an entry needs at least one detection rule")
		}
		for j := range e.Detect {
			if err := e.Detect[j].compile(fmt.Sprintf("%s.detect[%d]", at, j)); err != nil {
				return err
			}
		}
		specs := []BackendSpec{{MCP: e.MCP, Skill: e.Skill, Instructions: e.Instructions}}
		for b, o := range e.Backends {
			if b == "" {
				return catalogError(at+".backends", "empty backend id")
			}
			specs = append(specs, o)
		}
		for _, s := range specs {
			if err := e.validateSpec(at, s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s Source) validate(at string) error {
	switch {
	case s.NPM != "" && s.Repo != "":
		return catalogError(at, "an npm package or a repository, not both")
	case s.NPM != "":
		if !npmPattern.MatchString(s.NPM) {
			return catalogError(at+".npm", "%q is not an npm package name", s.NPM)
		}
		if !semverPattern.MatchString(s.Version) {
			return catalogError(at+".version", "%q is not an exact version (a pin is x.y.z, never a range, tag or latest)", s.Version)
		}
	case s.Repo != "":
		if !repoPattern.MatchString(s.Repo) {
			return catalogError(at+".repo", "%q is not owner/name", s.Repo)
		}
		if !shaPattern.MatchString(s.Commit) {
			return catalogError(at+".commit", "%q is not a full commit sha (40 lowercase hex digits; a branch or tag is not a pin)", s.Commit)
		}
	default:
		return catalogError(at, "a pinned identity is required (npm+version, or repo+commit)")
	}
	return nil
}

func (r *Rule) compile(at string) error {
	needPath := func() error {
		if r.Path == "" || !fs.ValidPath(r.Path) {
			return catalogError(at+".path", "%q is not a relative slash path inside the project", r.Path)
		}
		return nil
	}
	needPattern := func() error {
		if r.Pattern == "" || len(r.Pattern) > maxPatternLen {
			return catalogError(at+".pattern", "a pattern of 1 to %d bytes is required", maxPatternLen)
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return catalogError(at+".pattern", "%v", err)
		}
		r.re = re
		return nil
	}
	switch r.Kind {
	case RuleFileExists:
		return needPath()
	case RulePackageDep:
		if r.Name == "" || strings.ContainsAny(r.Name, " \t\n\"'") {
			return catalogError(at+".name", "a package name is required")
		}
		return nil
	case RuleFileContent:
		if err := needPath(); err != nil {
			return err
		}
		return needPattern()
	case RuleWorkflowAction, RuleComposeService:
		return needPattern()
	}
	return catalogError(at+".kind", "unknown rule kind %q", r.Kind)
}

func (e *Entry) validateSpec(at string, s BackendSpec) error {
	if s.Skip {
		return nil
	}
	if m := s.MCP; m != nil {
		if !skillNameRegex.MatchString(m.Name) {
			return catalogError(at+".mcp.name", "%q is not a server name", m.Name)
		}
		if (m.Command == "") == (m.URL == "") {
			return catalogError(at+".mcp", "a server is a command or a url, exactly one")
		}
		if m.AuthEnv != "" && !envPattern.MatchString(m.AuthEnv) {
			return catalogError(at+".mcp.authEnv", "%q is not an environment variable name", m.AuthEnv)
		}
		if m.URL != "" {
			if !strings.HasPrefix(m.URL, "https://") {
				return catalogError(at+".mcp.url", "a vendor-hosted server is reached over https")
			}
			if e.Tier != messages.TierRemoteMCP && e.Tier != messages.TierArbitrary {
				return catalogError(at+".tier", "a remote MCP server is tier T2R, not %s", e.Tier)
			}
		}
		if m.Command != "" {
			if !messages.TierNeedsApproval(e.Tier) {
				return catalogError(at+".tier", "a local MCP command runs code here: tier T2 or T3, not %s", e.Tier)
			}
			if e.Source.NPM != "" {
				pin := e.Source.NPM + "@" + e.Source.Version
				if !slices.ContainsFunc(m.Args, func(a string) bool { return strings.Contains(a, pin) }) {
					return catalogError(at+".mcp.args", "a local server of an npm pin must run exactly %s", pin)
				}
			}
		}
	}
	if sk := s.Skill; sk != nil {
		if e.Source.Repo == "" {
			return catalogError(at+".skill", "a skill comes from a pinned repository (source.repo and commit)")
		}
		if !skillNameRegex.MatchString(sk.Name) {
			return catalogError(at+".skill.name", "%q is not a skill name", sk.Name)
		}
		if sk.Path != "" && (!fs.ValidPath(sk.Path) || !safeName(sk.Path)) {
			return catalogError(at+".skill.path", "%q is not a relative path of [A-Za-z0-9._/-]", sk.Path)
		}
	}
	return nil
}

// Digest is a hash of the catalog's content: a profile cached against an
// older catalog is not reused.
func (c *Catalog) Digest() string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Lookup returns the entry with the id.
func (c *Catalog) Lookup(id string) (Entry, bool) {
	for _, e := range c.Entries {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// ParseCatalog decodes a catalog strictly (unknown fields and trailing
// data are errors) and validates it.
func ParseCatalog(data []byte) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, catalogError("", "cannot decode the catalog: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, catalogError("", "trailing data after the catalog")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Builtin is the catalog compiled into the binary.
func Builtin() *Catalog {
	c, err := ParseCatalog(builtinCatalog)
	if err != nil {
		panic("curation: the built-in catalog is invalid: " + err.Error())
	}
	return c
}

// LoadCatalog is <home>/capabilities.json when it exists (it replaces the
// built-in catalog), else the built-in one.
func LoadCatalog(home string) (*Catalog, error) {
	if home == "" {
		return Builtin(), nil
	}
	f, err := os.Open(filepath.Join(home, CatalogFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Builtin(), nil
	}
	if err != nil {
		return nil, messages.Wrap(messages.CodeInvalid, "capabilities", err, "cannot read "+CatalogFile)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCatalogBytes+1))
	if err != nil {
		return nil, messages.Wrap(messages.CodeInvalid, "capabilities", err, "cannot read "+CatalogFile)
	}
	if len(data) > maxCatalogBytes {
		return nil, catalogError("", "%s is larger than %d bytes", CatalogFile, maxCatalogBytes)
	}
	return ParseCatalog(data)
}

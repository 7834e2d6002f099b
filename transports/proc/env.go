package proc

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// baseAllow are the variables every backend process may take from the
// daemon's environment: what a shell and a toolchain need to run.
var baseAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR", "TZ", "TMPDIR",
	"LANG", "LANGUAGE", "LC_*",
	// TLS roots of the host (corporate proxies): paths, never secrets
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// FounderCredentials are the patterns (path.Match syntax) of seed 002's
// founder credentials: a person's identity on forges, clouds and SSH. One
// present in the daemon's environment refuses a start unless the operator
// named it for the backend.
var FounderCredentials = []string{
	"*_TOKEN", "*_SECRET", "*_SECRET_*", "*_PASSWORD", "*_PASSWD", "*_CREDENTIALS",
	"SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_AUTH_*", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
	"KUBECONFIG", "DOCKER_AUTH_CONFIG", "NETRC", "GIT_ASKPASS", "SSH_ASKPASS",
}

// EnvPolicy is one backend's environment policy.
type EnvPolicy struct {
	// Backend names the backend in errors.
	Backend string
	// Documented are the backend's own variables (patterns), taken from the
	// daemon's environment when present: e.g. ANTHROPIC_* for claude-code.
	// A documented variable is never refused as a founder credential for
	// its own backend (ANTHROPIC_AUTH_TOKEN is how claude-code logs in).
	Documented []string
	// Pass names variables of the daemon's environment the operator gave to
	// this backend (config backends.<id>.passEnv): passed through even when
	// they are founder credentials.
	Pass []string
	// Scrub names variables never taken from the daemon's environment even
	// when Documented matches them (the markers of a surrounding Claude
	// Code session, a CODEX_HOME the runtime sets itself), unless passed.
	Scrub []string
}

// CredentialError refuses a start: founder credentials are in the daemon's
// environment and the backend was not given them by name. Seed 002's
// runner exits 20 for it; the CLI does too.
type CredentialError struct {
	Backend string
	Names   []string
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("refusing to start %s: the daemon's environment holds founder credentials (%s); "+
		"unset them, or name them for this backend in the config (backends.%s.passEnv) if it must have them",
		e.Backend, strings.Join(e.Names, ", "), e.Backend)
}

// ExitCode is the process exit code for this refusal (seed 002).
func (e *CredentialError) ExitCode() int { return 20 }

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// patternSet is a list of path.Match patterns compiled once: the plain
// ones (a name, NAME_*, *_NAME, *_NAME_*) become a set of exact names and
// lists of prefixes, suffixes and infixes, so a name is matched with one
// map lookup and a few string comparisons instead of a path.Match per
// pattern; any other pattern is kept and matched with path.Match. Its
// answers are path.Match's: a star never matches a '/', so no name with a
// '/' matches a starred plain pattern. Read-only once built; safe for
// concurrent use.
type patternSet struct {
	exact    map[string]struct{}
	prefix   []string // lit*
	suffix   []string // *lit
	infix    []string // *lit*
	matchAll []string // the rest, for path.Match
}

func compilePatterns(patterns []string) *patternSet {
	s := &patternSet{exact: map[string]struct{}{}}
	for _, p := range patterns {
		lit, lead := strings.CutPrefix(p, "*")
		lit, trail := strings.CutSuffix(lit, "*")
		switch {
		case strings.ContainsAny(lit, `*?[\/`):
			// other metacharacters, or a '/' (which a star must not
			// cross): left to path.Match
			s.matchAll = append(s.matchAll, p)
		case lead && trail:
			s.infix = append(s.infix, lit)
		case lead:
			s.suffix = append(s.suffix, lit)
		case trail:
			s.prefix = append(s.prefix, lit)
		default:
			s.exact[lit] = struct{}{}
		}
	}
	return s
}

// match reports whether name matches a pattern of s.
func (s *patternSet) match(name string) bool {
	if _, ok := s.exact[name]; ok {
		return true
	}
	if strings.IndexByte(name, '/') < 0 {
		for _, x := range s.suffix {
			if strings.HasSuffix(name, x) {
				return true
			}
		}
		for _, x := range s.prefix {
			if strings.HasPrefix(name, x) {
				return true
			}
		}
		for _, x := range s.infix {
			if strings.Contains(name, x) {
				return true
			}
		}
	}
	return matchAny(s.matchAll, name)
}

// founderCredentials is FounderCredentials compiled at package init;
// baseAllowed is baseAllow.
var (
	founderCredentials = compilePatterns(FounderCredentials)
	baseAllowed        = compilePatterns(baseAllow)
)

// IsCredential reports whether name matches FounderCredentials (as
// compiled at package init: the list is read-only).
func IsCredential(name string) bool { return founderCredentials.match(name) }

// Check returns a *CredentialError when daemon (KEY=VALUE) holds a founder
// credential that is neither passed to nor documented for the backend, nor
// given a value explicitly (explicit is the backend environment from the
// config's env and --env, which replaces the daemon's value).
func (p EnvPolicy) Check(daemon, explicit []string) error {
	given := map[string]bool{}
	for _, kv := range explicit {
		k, _, _ := strings.Cut(kv, "=")
		given[k] = true
	}
	var bad []string
	for _, kv := range daemon {
		k, v, _ := strings.Cut(kv, "=")
		if v == "" || !IsCredential(k) || given[k] || matchAny(p.Pass, k) || matchAny(p.Documented, k) {
			continue
		}
		bad = append(bad, k)
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return &CredentialError{Backend: p.Backend, Names: bad}
}

// Build returns the environment of a backend process: the allowlisted,
// documented and passed variables of daemon, then explicit (which wins),
// one entry per key in first-seen order. It does not check credentials;
// call Check first.
func (p EnvPolicy) Build(daemon, explicit []string) []string {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range daemon {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if matchAny(p.Pass, k) || (!matchAny(p.Scrub, k) && (matchAny(p.Documented, k) || (baseAllowed.match(k) && !IsCredential(k)))) {
			set(k, v)
		}
	}
	for _, kv := range explicit {
		if k, v, ok := strings.Cut(kv, "="); ok {
			set(k, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out
}

// Environ is the environment of a backend process, the one builder every
// backend uses: Build of the daemon's environment (the allowlist, the
// backend's documented variables less Scrub, what the operator passed by
// name), then HOME when home is set (the session's own HOME), then each of
// layers in order (the backend's fixed entries, the transport's, the
// session's config env and --env), the last value of a name winning at
// the place where it first stood. Call Check first: Environ does not
// refuse anything.
func (p EnvPolicy) Environ(daemon []string, home string, layers ...[]string) []string {
	var explicit []string
	if home != "" {
		explicit = append(explicit, "HOME="+home)
	}
	for _, l := range layers {
		explicit = append(explicit, l...)
	}
	return p.Build(daemon, explicit)
}

// Secrets returns the values in env whose names look like credentials or
// keys (founder credentials, *_KEY, *_API_KEY): what redaction must hide.
func Secrets(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < 6 {
			continue // too short to redact without mangling ordinary text
		}
		if IsCredential(k) || strings.HasSuffix(k, "_KEY") || strings.Contains(k, "API_KEY") || strings.HasSuffix(k, "_AUTH") {
			out = append(out, v)
		}
	}
	return out
}

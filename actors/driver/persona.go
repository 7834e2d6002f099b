package driver

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// Who answers a driven session's clarifications (the clarify key).
const (
	ClarifyDriver = "driver"
	ClarifyHuman  = "human"
)

// DefaultPersona is the packaged driver persona's name.
const DefaultPersona = "code-specialist"

// MaxPersonaBytes bounds a persona file.
const MaxPersonaBytes = 64 << 10

//go:embed personas/*.md
var packaged embed.FS

// Persona is a driver as data: markdown with frontmatter (seed 000 §2).
// The frontmatter sets the policy the runtime holds the driver's sessions
// to (Backend, MaxPosture, InitialPosture, MaxRounds) and the driver's own
// loop (Model, a class sentinel or a concrete id, and Effort); the body is
// its system prompt.
type Persona struct {
	Name        string
	Description string
	// Driver marks a persona that may be dispatched as a driver; only
	// those are, and none is ever auto-installed or shown as a starter.
	Driver         bool
	Backend        string
	MaxPosture     messages.Posture
	InitialPosture messages.Posture
	MaxRounds      int
	// AllowedTools are the driver's OWN tools: omitted or exactly the op
	// tool (a driver's only tool is code_session).
	AllowedTools []string
	Model        string
	Effort       messages.Effort
	// Clarify says who answers the driven sessions' clarifications:
	// "driver" (the default: the persona decides) or "human" (each one
	// goes to the human, and the driver waits for the answer).
	Clarify string
	Prompt  string
	// Source is where it was read: "packaged" or the file's path.
	Source string
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidName reports whether name can name a persona file.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Load reads the persona name: <home>/agents/<name>.md when it exists,
// else the packaged one of that name (read-only; never written to home).
// An unknown name is not_found; a malformed file is invalid.
func Load(home, name string) (Persona, error) {
	const op = "delegate"
	if !ValidName(name) {
		return Persona{}, messages.FieldError(op, "agent", "%q is not a persona name (lower-case letters, digits, - and _)", name)
	}
	if home != "" {
		path := filepath.Join(home, "agents", name+".md")
		data, err := readBounded(path)
		if err == nil {
			p, perr := Parse(data)
			if perr != nil {
				return Persona{}, messages.Wrap(messages.CodeInvalid, op, perr, fmt.Sprintf("persona %s: %v", path, perr))
			}
			if p.Name != "" && p.Name != name {
				return Persona{}, messages.FieldError(op, "agent", "persona %s names itself %q", path, p.Name)
			}
			p.Name, p.Source = name, path
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return Persona{}, messages.Wrap(messages.CodeInvalid, op, err, fmt.Sprintf("persona %s: %v", path, err))
		}
	}
	data, err := packaged.ReadFile("personas/" + name + ".md")
	if err != nil {
		return Persona{}, messages.Errorf(messages.CodeNotFound, op, "no persona %q (put one at <home>/agents/%s.md)", name, name)
	}
	p, err := Parse(data)
	if err != nil {
		return Persona{}, messages.Wrap(messages.CodeInternal, op, err, "the packaged persona does not parse")
	}
	p.Name, p.Source = name, "packaged"
	return p, nil
}

// Starters are the packaged personas a fresh home may be offered: never a
// driver (a driver is privileged: it opens sessions on its own).
func Starters() []Persona {
	var out []Persona
	entries, _ := packaged.ReadDir("personas")
	for _, e := range entries {
		data, err := packaged.ReadFile("personas/" + e.Name())
		if err != nil {
			continue
		}
		p, err := Parse(data)
		if err != nil || p.Driver {
			continue
		}
		out = append(out, p)
	}
	return out
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPersonaBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxPersonaBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxPersonaBytes)
	}
	return data, nil
}

// Parse reads a persona: a frontmatter block between two "---" lines, then
// the body (the system prompt, required). Frontmatter lines are `key:
// value`, a value either a scalar (optionally double-quoted) or a list
// `[a, b]`; blank lines and lines starting with # are skipped. Unknown and
// repeated keys are errors, as are bad postures, efforts and round counts,
// an initialPosture above maxPosture, and allowedTools other than the op
// tool. It never panics and is bounded by MaxPersonaBytes.
func Parse(data []byte) (Persona, error) {
	var p Persona
	if len(data) > MaxPersonaBytes {
		return p, fmt.Errorf("larger than %d bytes", MaxPersonaBytes)
	}
	if !utf8.Valid(data) {
		return p, errors.New("not UTF-8")
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return p, errors.New("no frontmatter: the file must start with a --- line")
	}
	front, body, ok := cutFence(rest)
	if !ok {
		return p, errors.New("the frontmatter has no closing --- line")
	}
	seen := map[string]bool{}
	for i, line := range strings.Split(front, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return p, fmt.Errorf("frontmatter line %d: want key: value", i+2)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if seen[key] {
			return p, fmt.Errorf("frontmatter: %s is set twice", key)
		}
		seen[key] = true
		if err := p.set(key, val); err != nil {
			return p, fmt.Errorf("frontmatter: %s: %w", key, err)
		}
	}
	p.Prompt = strings.TrimSpace(body)
	if p.Prompt == "" {
		return p, errors.New("the body (the system prompt) is empty")
	}
	if p.InitialPosture != "" && p.MaxPosture != "" && p.InitialPosture.Above(p.MaxPosture) {
		return p, fmt.Errorf("initialPosture %s is above maxPosture %s", p.InitialPosture, p.MaxPosture)
	}
	return p, nil
}

// cutFence splits at the first line that is exactly "---".
func cutFence(s string) (front, body string, ok bool) {
	if strings.HasPrefix(s, "---\n") || s == "---" {
		return "", strings.TrimPrefix(strings.TrimPrefix(s, "---"), "\n"), true
	}
	i := strings.Index(s, "\n---\n")
	if i < 0 {
		if strings.HasSuffix(s, "\n---") {
			return s[:len(s)-4], "", true
		}
		return "", "", false
	}
	return s[:i], s[i+5:], true
}

func (p *Persona) set(key, val string) error {
	switch key {
	case "name":
		s, err := scalar(val)
		if err == nil && s != "" && !ValidName(s) {
			err = fmt.Errorf("%q is not a persona name", s)
		}
		p.Name = s
		return err
	case "description":
		s, err := scalar(val)
		p.Description = s
		return err
	case "driver":
		s, err := scalar(val)
		if err != nil {
			return err
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", s)
		}
		p.Driver = b
	case "backend":
		s, err := scalar(val)
		if err == nil && s != "" && !ValidName(s) {
			err = fmt.Errorf("%q is not a backend id", s)
		}
		p.Backend = s
		return err
	case "maxPosture", "initialPosture":
		s, err := scalar(val)
		if err != nil {
			return err
		}
		pos := messages.Posture(s)
		if !pos.Valid() {
			return fmt.Errorf("unknown posture %q (plan, default, acceptEdits, full)", s)
		}
		if key == "maxPosture" {
			p.MaxPosture = pos
		} else {
			p.InitialPosture = pos
		}
	case "maxRounds":
		s, err := scalar(val)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			return fmt.Errorf("want a number of rounds from 1 to 10000, got %q", s)
		}
		p.MaxRounds = n
	case "allowedTools":
		list, err := listValue(val)
		if err != nil {
			return err
		}
		for _, t := range list {
			if t != messages.ToolName {
				return fmt.Errorf("a driver's only tool is %s, not %q", messages.ToolName, t)
			}
		}
		if len(list) == 0 {
			return fmt.Errorf("explicitly empty: a driver needs %s", messages.ToolName)
		}
		p.AllowedTools = list
	case "model":
		s, err := scalar(val)
		if err == nil && len(s) > 200 {
			err = errors.New("longer than 200 characters")
		}
		p.Model = s
		return err
	case "effort":
		s, err := scalar(val)
		if err != nil {
			return err
		}
		e := messages.Effort(s)
		if !e.Valid() {
			return fmt.Errorf("unknown effort %q", s)
		}
		p.Effort = e
	case "clarify":
		s, err := scalar(val)
		if err != nil {
			return err
		}
		if s != ClarifyDriver && s != ClarifyHuman {
			return fmt.Errorf("want %s or %s, got %q", ClarifyDriver, ClarifyHuman, s)
		}
		p.Clarify = s
	default:
		return errors.New("unknown key (name, description, driver, backend, maxPosture, initialPosture, maxRounds, allowedTools, model, effort, clarify)")
	}
	return nil
}

// scalar unquotes a double-quoted value; a bare one is taken as is.
func scalar(v string) (string, error) {
	if strings.HasPrefix(v, `"`) {
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", errors.New("a badly quoted value")
		}
		return s, nil
	}
	if strings.HasPrefix(v, "[") {
		return "", errors.New("want a single value, not a list")
	}
	return v, nil
}

// listValue reads `[a, b]` (or a single bare value, a list of one).
func listValue(v string) ([]string, error) {
	inner, ok := strings.CutPrefix(v, "[")
	if !ok {
		s, err := scalar(v)
		if err != nil || s == "" {
			return nil, err
		}
		return []string{s}, nil
	}
	inner, ok = strings.CutSuffix(inner, "]")
	if !ok {
		return nil, errors.New("a list must end with ]")
	}
	var out []string
	for _, part := range strings.Split(inner, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		s, err := scalar(part)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Render writes p back as a persona file (tests round-trip it).
func (p Persona) Render() []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, strconv.Quote(v))
		}
	}
	kv("name", p.Name)
	kv("description", p.Description)
	fmt.Fprintf(&b, "driver: %t\n", p.Driver)
	kv("backend", p.Backend)
	kv("maxPosture", string(p.MaxPosture))
	kv("initialPosture", string(p.InitialPosture))
	if p.MaxRounds > 0 {
		fmt.Fprintf(&b, "maxRounds: %d\n", p.MaxRounds)
	}
	if p.AllowedTools != nil {
		q := make([]string, len(p.AllowedTools))
		for i, t := range p.AllowedTools {
			q[i] = strconv.Quote(t)
		}
		fmt.Fprintf(&b, "allowedTools: [%s]\n", strings.Join(q, ", "))
	}
	kv("model", p.Model)
	kv("effort", string(p.Effort))
	kv("clarify", p.Clarify)
	b.WriteString("---\n")
	b.WriteString(p.Prompt)
	b.WriteString("\n")
	return b.Bytes()
}

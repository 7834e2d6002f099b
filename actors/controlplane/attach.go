package controlplane

import (
	"strings"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// AttachView is the backend's own interactive resume command for a
// session, rendered from its descriptor's ExternalAttach template.
type AttachView struct {
	Command string `json:"command"`
	Note    string `json:"note,omitempty"`
	// Caution is set while the session is live: attaching then means two
	// drivers on one backend session.
	Caution string `json:"caution,omitempty"`
}

// TwoDriversCaution is AttachView.Caution.
const TwoDriversCaution = "the session is still live: attaching from a terminal now means two drivers on one session. " +
	"Stop it (or let it end) before you resume it by hand."

// RenderAttach fills the template's {sessionId} with the latest run's
// externalSessionId and {cwd} with the record's cwd. It returns nil when
// there is no template, no run captured an external id, the template needs
// a cwd the record lacks, or a value cannot be put safely into a shell
// command (a quoted placeholder whose value holds a quote, $, ` or \, or a
// control character).
func RenderAttach(t *messages.ExternalAttach, rec messages.SessionRecord) *AttachView {
	return RenderAttachFor(t, rec, AttachLaunch{})
}

// AttachLaunch is what the session's backend process was started with,
// beyond the record: the binary the daemon ran and the HOME it gave it.
type AttachLaunch struct {
	Bin  string // the backend's executable, "" when the template's own name is right
	Home string // the HOME the backend ran with, "" when it inherited the user's
	// Env is more of the session's environment the command needs, as
	// NAME=value (codex's per-session CODEX_HOME, which holds its thread)
	Env []string
}

// AttachEnver is a transport whose interactive resume needs more of the
// session's environment than HOME: AttachEnv returns it, as NAME=value,
// for the session spec (its SessionID and the daemon's backend Env).
type AttachEnver interface {
	AttachEnv(spec transports.SessionSpec) []string
}

// RenderAttachFor renders the command so it runs as is from any shell: it
// changes to the session's cwd, sets the HOME the backend ran with (Claude
// Code keeps its transcripts under it) and the launch's Env (codex's
// CODEX_HOME), and names the binary
// the daemon ran, each quoted for the shell. The note's placeholders are
// filled too.
func RenderAttachFor(t *messages.ExternalAttach, rec messages.SessionRecord, l AttachLaunch) *AttachView {
	v := renderAttach(t, rec)
	if v == nil {
		return nil
	}
	ext := ""
	if run := rec.LatestRun(); run != nil {
		ext = run.ExternalSessionID
	}
	// the note is prose for a person, not a command: no quoting
	v.Note = strings.NewReplacer("{cwd}", rec.Cwd, "{sessionId}", ext).Replace(v.Note)
	cmd := v.Command
	if l.Bin != "" {
		_, rest, _ := strings.Cut(cmd, " ")
		cmd = strings.TrimSpace(shellQuote(l.Bin) + " " + rest)
	}
	for i := len(l.Env) - 1; i >= 0; i-- {
		if name, val, ok := strings.Cut(l.Env[i], "="); ok && name != "" && plainArg(name) && !strings.ContainsAny(name, "=/") {
			cmd = name + "=" + shellQuote(val) + " " + cmd
		}
	}
	if l.Home != "" {
		cmd = "HOME=" + shellQuote(l.Home) + " " + cmd
	}
	if rec.Cwd != "" {
		cmd = "cd " + shellQuote(rec.Cwd) + " && " + cmd
	}
	v.Command = cmd
	return v
}

// ShellQuote quotes s for a POSIX shell (as is when it needs no quotes).
func ShellQuote(s string) string { return shellQuote(s) }

func shellQuote(s string) string {
	if s != "" && plainArg(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func renderAttach(t *messages.ExternalAttach, rec messages.SessionRecord) *AttachView {
	if t == nil || t.CommandTemplate == "" {
		return nil
	}
	run := rec.LatestRun()
	if run == nil || run.ExternalSessionID == "" {
		return nil
	}
	vals := map[string]string{"sessionId": run.ExternalSessionID, "cwd": rec.Cwd}
	cmd, ok := fillTemplate(t.CommandTemplate, vals)
	if !ok {
		return nil
	}
	v := &AttachView{Command: cmd, Note: t.Note}
	if rec.Status.Live() {
		v.Caution = TwoDriversCaution
	}
	return v
}

// fillTemplate replaces {name} placeholders. A placeholder inside double
// quotes gets the value as is (refused if it could end the quotes or expand);
// an unquoted one gets it single-quoted unless it is plainly safe. An empty
// value is refused: a command with a missing argument could attach to the
// wrong session or repository.
func fillTemplate(tmpl string, vals map[string]string) (string, bool) {
	var b strings.Builder
	inDouble := false
	for i := 0; i < len(tmpl); {
		c := tmpl[i]
		if c == '"' {
			inDouble = !inDouble
			b.WriteByte(c)
			i++
			continue
		}
		if c != '{' {
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(tmpl[i:], '}')
		if end < 0 {
			b.WriteString(tmpl[i:])
			break
		}
		name := tmpl[i+1 : i+end]
		v, known := vals[name]
		if !known {
			b.WriteString(tmpl[i : i+end+1])
			i += end + 1
			continue
		}
		if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "", false
		}
		switch {
		case inDouble:
			if strings.ContainsAny(v, "\"$`\\") {
				return "", false
			}
			b.WriteString(v)
		case plainArg(v):
			b.WriteString(v)
		default:
			b.WriteString("'" + strings.ReplaceAll(v, "'", `'\''`) + "'")
		}
		i += end + 1
	}
	return b.String(), !inDouble
}

func plainArg(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-/:@%+=,", r):
		default:
			return false
		}
	}
	return true
}

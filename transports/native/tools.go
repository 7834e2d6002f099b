package native

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codesession/codesession/transports/gate"
	"github.com/codesession/codesession/transports/proc"
)

// Tool names. The edit tools (write, edit) are the descriptor's
// EditToolNames; their input names the file as "path".
const (
	ToolRead  = "read"
	ToolWrite = "write"
	ToolEdit  = "edit"
	ToolGlob  = "glob"
	ToolGrep  = "grep"
	ToolLs    = "ls"
	ToolBash  = "bash"
)

// ToolNames lists every tool of the native backend, reads first.
func ToolNames() []string {
	return []string{ToolRead, ToolGlob, ToolGrep, ToolLs, ToolWrite, ToolEdit, ToolBash}
}

// toolKind is what a tool may do, which is what posture gates.
type toolKind int

const (
	kindInvalid toolKind = iota
	kindRead             // reads the workspace
	kindWrite            // changes files in the workspace
	kindExec             // runs a command
)

func (k toolKind) String() string {
	switch k {
	case kindRead:
		return "read"
	case kindWrite:
		return "write"
	case kindExec:
		return "exec"
	}
	return "invalid"
}

// Limits of the tools; a limit that fires is always said in the result.
const (
	readDefaultLines  = 2000
	readMaxLineBytes  = 2000
	listMaxEntries    = 1000
	globMaxMatches    = 500
	grepMaxMatches    = 200
	grepMaxFileBytes  = 10 << 20
	walkMaxEntries    = 200_000
	bashDefaultWall   = 2 * time.Minute
	bashMaxWall       = 10 * time.Minute
	bashKillGrace     = 2 * time.Second
	DefaultOutputCap  = 64 << 10
	binarySniffLength = 8000
)

// ToolSpec is what the model is told about one tool.
type ToolSpec struct {
	Name        string
	Description string
	// Schema is the JSON schema of the tool's input (an object).
	Schema map[string]any
}

// toolDef is one tool: its spec, its kind and its implementation.
type toolDef struct {
	spec ToolSpec
	kind toolKind
	run  func(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult
}

// toolResult is a tool's answer to the model.
type toolResult struct {
	output    string
	isError   bool
	truncated bool
	original  int // bytes before the cap, when truncated
}

func errResult(format string, args ...any) toolResult {
	return toolResult{output: fmt.Sprintf(format, args...), isError: true}
}

// refused turns a gate error into the tool result.
func refused(err error) toolResult { return toolResult{output: err.Error(), isError: true} }

// toolEnv is what a tool runs with.
type toolEnv struct {
	ws        gate.Workspace
	outputCap int
	// env is the environment of bash (KEY=VALUE), already scrubbed.
	env []string
	// bashWall is the default wall clock of one bash call.
	bashWall time.Duration
	// procs contains bash's processes (watchdog, the session's cgroup);
	// confine restricts their writes to the workspace and tmp, the
	// session's own TMPDIR (best effort: nil without Landlock).
	procs   *proc.Group
	confine *proc.Confinement
	tmp     string
	// removeTmp removes tmp and its boot-sweep record (proc.Group.TempDir)
	removeTmp func()
}

func obj(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func num(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }

// tools is the native toolset, by name.
var tools = map[string]toolDef{
	ToolRead: {kind: kindRead, run: runRead, spec: ToolSpec{Name: ToolRead,
		Description: "Read a text file of the workspace. Lines are numbered from 1. Use offset and limit for long files.",
		Schema: obj(map[string]any{
			"path":   str("the file, relative to the workspace (or absolute inside it)"),
			"offset": num("the first line to show (1-based; default 1)"),
			"limit":  num(fmt.Sprintf("how many lines to show (default %d)", readDefaultLines)),
		}, "path")}},
	ToolWrite: {kind: kindWrite, run: runWrite, spec: ToolSpec{Name: ToolWrite,
		Description: "Write a whole file of the workspace, creating it and its directories when missing.",
		Schema: obj(map[string]any{
			"path":    str("the file, relative to the workspace"),
			"content": str("the complete new content"),
		}, "path", "content")}},
	ToolEdit: {kind: kindWrite, run: runEdit, spec: ToolSpec{Name: ToolEdit,
		Description: "Replace exactly one occurrence of old_string by new_string in a file. old_string must occur exactly once; include surrounding lines to make it unique.",
		Schema: obj(map[string]any{
			"path":       str("the file, relative to the workspace"),
			"old_string": str("the exact text to replace; it must occur exactly once"),
			"new_string": str("the replacement text"),
		}, "path", "old_string", "new_string")}},
	ToolGlob: {kind: kindRead, run: runGlob, spec: ToolSpec{Name: ToolGlob,
		Description: "List the files of the workspace matching a glob pattern (** matches any depth, {a,b} alternatives).",
		Schema: obj(map[string]any{
			"pattern": str("the pattern, e.g. **/*.go or src/{a,b}/*.ts"),
		}, "pattern")}},
	ToolGrep: {kind: kindRead, run: runGrep, spec: ToolSpec{Name: ToolGrep,
		Description: "Search file contents with a regular expression (RE2 syntax); prints path:line: text.",
		Schema: obj(map[string]any{
			"pattern":     str("the regular expression"),
			"path":        str("a file or directory to search (default: the workspace)"),
			"glob":        str("only files whose path relative to the searched directory matches this glob, e.g. **/*.go"),
			"ignore_case": map[string]any{"type": "boolean", "description": "match case-insensitively"},
		}, "pattern")}},
	ToolLs: {kind: kindRead, run: runLs, spec: ToolSpec{Name: ToolLs,
		Description: "List a directory of the workspace: directories end with /, symlinks with @.",
		Schema: obj(map[string]any{
			"path": str("the directory (default: the workspace)"),
		})}},
	ToolBash: {kind: kindExec, run: runBash, spec: ToolSpec{Name: ToolBash,
		Description: "Run a shell command (bash -c) in the workspace. Output (stdout and stderr together) is capped; the command is killed past its wall clock.",
		Schema: obj(map[string]any{
			"command":         str("the command"),
			"timeout_seconds": num(fmt.Sprintf("the wall clock in seconds (default %d, at most %d)", int(bashDefaultWall/time.Second), int(bashMaxWall/time.Second))),
		}, "command")}},
}

// decodeInput decodes a tool input strictly into v.
func decodeInput(input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid input: %v", err)
	}
	return nil
}

func runRead(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("read: %v", err)
	}
	real, err := env.ws.Resolve(in.Path)
	if err != nil {
		return refused(err)
	}
	rel := env.ws.Rel(real)
	f, err := env.ws.OpenFile(real, os.O_RDONLY, 0)
	if err != nil {
		return errResult("read: %s: %v", rel, pathErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return errResult("read: %s: %v", rel, pathErr(err))
	}
	if fi.IsDir() {
		return errResult("read: %s is a directory (use ls)", rel)
	}
	if !fi.Mode().IsRegular() {
		return errResult("read: %s is not a regular file", rel)
	}
	head := make([]byte, binarySniffLength)
	n, _ := io.ReadFull(f, head)
	if bytes.IndexByte(head[:n], 0) >= 0 {
		return toolResult{output: fmt.Sprintf("%s is a binary file (%d bytes); not shown", rel, fi.Size())}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return errResult("read: %s: %v", rel, pathErr(err))
	}
	offset, limit := max(in.Offset, 1), in.Limit
	if limit <= 0 {
		limit = readDefaultLines
	}
	var b strings.Builder
	sc := bufio.NewReader(f)
	line, shown, total, cutLines := 0, 0, 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return errResult("read: interrupted")
		}
		text, err := sc.ReadString('\n')
		if text == "" && err != nil {
			break
		}
		line++
		total = line
		if line < offset || shown >= limit {
			if err != nil {
				break
			}
			continue
		}
		text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
		if len(text) > readMaxLineBytes {
			text = cutUTF8(text, readMaxLineBytes) + " [line cut]"
			cutLines++
		}
		fmt.Fprintf(&b, "%6d\t%s\n", line, text)
		shown++
		if err != nil {
			break
		}
	}
	if total == 0 {
		return toolResult{output: fmt.Sprintf("%s is empty", rel)}
	}
	if shown == 0 {
		return toolResult{output: fmt.Sprintf("%s has %d lines; none from line %d", rel, total, offset)}
	}
	if last := offset + shown - 1; last < total {
		fmt.Fprintf(&b, "[showed lines %d-%d of %d; read on with offset %d]\n", offset, last, total, last+1)
	}
	if cutLines > 0 {
		fmt.Fprintf(&b, "[%d line(s) cut at %d bytes]\n", cutLines, readMaxLineBytes)
	}
	return toolResult{output: b.String()}
}

func runWrite(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("write: %v", err)
	}
	if in.Content == nil {
		return errResult("write: invalid input: content is required")
	}
	real, err := env.ws.Resolve(in.Path)
	if err != nil {
		return refused(err)
	}
	rel := env.ws.Rel(real)
	if real == env.ws.Real() {
		return errResult("write: %q is the workspace itself", in.Path)
	}
	created := true
	if fi, err := os.Lstat(real); err == nil {
		if fi.IsDir() {
			return errResult("write: %s is a directory", rel)
		}
		created = false
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return errResult("write: %s: %v", rel, pathErr(err))
	}
	f, err := env.ws.OpenFile(real, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return errResult("write: %s: %v", rel, pathErr(err))
	}
	_, werr := f.WriteString(*in.Content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return errResult("write: %s: %v", rel, pathErr(err))
	}
	verb := "updated"
	if created {
		verb = "created"
	}
	return toolResult{output: fmt.Sprintf("%s %s (%d bytes)", verb, rel, len(*in.Content))}
}

func runEdit(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Path      string  `json:"path"`
		OldString *string `json:"old_string"`
		NewString *string `json:"new_string"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("edit: %v", err)
	}
	if in.OldString == nil || in.NewString == nil {
		return errResult("edit: invalid input: old_string and new_string are required")
	}
	if *in.OldString == "" {
		return errResult("edit: old_string is empty; use write to create a file")
	}
	if *in.OldString == *in.NewString {
		return errResult("edit: old_string and new_string are the same; nothing would change")
	}
	real, err := env.ws.Resolve(in.Path)
	if err != nil {
		return refused(err)
	}
	rel := env.ws.Rel(real)
	f, err := env.ws.OpenFile(real, os.O_RDWR, 0)
	if err != nil {
		return errResult("edit: %s: %v", rel, pathErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return errResult("edit: %s: %v", rel, pathErr(err))
	}
	if !fi.Mode().IsRegular() {
		return errResult("edit: %s is not a regular file", rel)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return errResult("edit: %s: %v", rel, pathErr(err))
	}
	switch n := strings.Count(string(data), *in.OldString); n {
	case 1:
	case 0:
		return errResult("edit: old_string was not found in %s; read the file and copy the text exactly", rel)
	default:
		return errResult("edit: old_string occurs %d times in %s; it must occur exactly once: include more surrounding text", n, rel)
	}
	out := strings.Replace(string(data), *in.OldString, *in.NewString, 1)
	if err := f.Truncate(0); err != nil {
		return errResult("edit: %s: %v", rel, pathErr(err))
	}
	if _, err := f.WriteAt([]byte(out), 0); err != nil {
		return errResult("edit: %s: %v", rel, pathErr(err))
	}
	return toolResult{output: fmt.Sprintf("edited %s: replaced 1 occurrence (%d -> %d bytes)", rel, len(data), len(out))}
}

func runLs(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Path string `json:"path"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("ls: %v", err)
	}
	if in.Path == "" {
		in.Path = "."
	}
	real, err := env.ws.Resolve(in.Path)
	if err != nil {
		return refused(err)
	}
	rel := env.ws.Rel(real)
	entries, err := os.ReadDir(real)
	if err != nil {
		return errResult("ls: %s: %v", rel, pathErr(err))
	}
	var b strings.Builder
	for i, e := range entries {
		if i == listMaxEntries {
			fmt.Fprintf(&b, "[%d more entries left out]\n", len(entries)-listMaxEntries)
			break
		}
		name := e.Name()
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			name += "@"
		case e.IsDir():
			name += "/"
		}
		b.WriteString(name + "\n")
	}
	if len(entries) == 0 {
		return toolResult{output: fmt.Sprintf("%s is empty", rel)}
	}
	return toolResult{output: b.String()}
}

func runGlob(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Pattern string `json:"pattern"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("glob: %v", err)
	}
	matches, leftOut, capped, err := gate.Glob(ctx, env.ws, in.Pattern, walkMaxEntries)
	var ref *gate.Refusal
	switch {
	case errors.As(err, &ref):
		return refused(err)
	case err != nil:
		return errResult("glob: %v", err)
	}
	var b strings.Builder
	for i, m := range matches {
		if i == globMaxMatches {
			fmt.Fprintf(&b, "[%d more matches left out: narrow the pattern]\n", len(matches)-globMaxMatches)
			break
		}
		b.WriteString(env.ws.Rel(m) + "\n")
	}
	if len(matches) == 0 {
		b.WriteString("no matches\n")
	}
	if leftOut > 0 {
		fmt.Fprintf(&b, "[%d match(es) left out: they resolve outside the workspace or through a dangling symlink]\n", leftOut)
	}
	if capped {
		fmt.Fprintf(&b, "[the walk stopped after %d entries]\n", walkMaxEntries)
	}
	return toolResult{output: b.String()}
}

func runGrep(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		Glob       string `json:"glob"`
		IgnoreCase bool   `json:"ignore_case"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("grep: %v", err)
	}
	if in.Pattern == "" {
		return errResult("grep: the pattern is empty")
	}
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return errResult("grep: bad pattern: %v", err)
	}
	if in.Path == "" {
		in.Path = "."
	}
	root, err := env.ws.Resolve(in.Path)
	if err != nil {
		return refused(err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return errResult("grep: %s: %v", env.ws.Rel(root), pathErr(err))
	}
	var files []string
	leftOut, capped := 0, false
	if fi.IsDir() {
		walked := 0
		werr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if d.Name() == ".git" && path != root {
					return filepath.SkipDir
				}
				return nil
			}
			walked++
			if walked > walkMaxEntries {
				capped = true
				return fs.SkipAll
			}
			rel, _ := filepath.Rel(root, path)
			if in.Glob != "" && !gate.MatchGlob(in.Glob, filepath.ToSlash(rel)) && !gate.MatchGlob(in.Glob, d.Name()) {
				return nil
			}
			r, gerr := env.ws.Resolve(path)
			if gerr != nil {
				leftOut++
				return nil
			}
			if st, serr := os.Stat(r); serr == nil && st.Mode().IsRegular() {
				files = append(files, r)
			}
			return nil
		})
		if werr != nil && !errors.Is(werr, fs.SkipAll) {
			return errResult("grep: %v", werr)
		}
	} else {
		files = []string{root}
	}
	var b strings.Builder
	found, more := 0, 0
	for _, path := range files {
		if ctx.Err() != nil {
			return errResult("grep: interrupted")
		}
		st, err := os.Stat(path)
		if err != nil || st.Size() > grepMaxFileBytes {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(data[:min(len(data), binarySniffLength)], 0) >= 0 {
			continue
		}
		rel := env.ws.Rel(path)
		for i, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if found >= grepMaxMatches {
				more++
				continue
			}
			found++
			fmt.Fprintf(&b, "%s:%d: %s\n", rel, i+1, cutUTF8(strings.TrimSuffix(line, "\r"), 500))
		}
	}
	if found == 0 {
		b.WriteString("no matches\n")
	}
	if more > 0 {
		fmt.Fprintf(&b, "[%d more matches left out: narrow the pattern or the path]\n", more)
	}
	if leftOut > 0 {
		fmt.Fprintf(&b, "[%d file(s) left out: they resolve outside the workspace or through a dangling symlink]\n", leftOut)
	}
	if capped {
		fmt.Fprintf(&b, "[the walk stopped after %d entries]\n", walkMaxEntries)
	}
	return toolResult{output: b.String()}
}

func runBash(ctx context.Context, env *toolEnv, input json.RawMessage) toolResult {
	var in struct {
		Command        string `json:"command"`
		TimeoutSeconds int    `json:"timeout_seconds"`
		Description    string `json:"description"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errResult("bash: %v", err)
	}
	if strings.TrimSpace(in.Command) == "" {
		return errResult("bash: the command is empty")
	}
	wall := env.bashWall
	if wall <= 0 {
		wall = bashDefaultWall
	}
	if in.TimeoutSeconds > 0 {
		wall = min(time.Duration(in.TimeoutSeconds)*time.Second, bashMaxWall)
	}
	return runCommand(ctx, env, in.Command, wall)
}

// cutUTF8 cuts s to at most n bytes without splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// pathErr drops a *fs.PathError's path, which the caller already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

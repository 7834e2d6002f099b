package diffcapture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// safeConfig is passed as -c to every git run. Command-line configuration
// wins over the repository's own, which an agent may have written: nothing a
// capture runs may execute a program the repository names, page, colour,
// fetch, or write anything into the repository. (diff.external is not here:
// an empty value makes porcelain diff try to run "", and the capture runs
// only plumbing diffs, which never read it, with --no-ext-diff besides.)
var safeConfig = []string{
	"core.hooksPath=/dev/null", // post-index-change runs when an index is written
	"core.fsmonitor=false",     // a hook path in .git/config would run on every status
	"core.quotePath=false",
	"core.splitIndex=false", // a scratch index must not leave shared-index files in .git
	"core.pager=cat",
	"color.ui=false",
	"protocol.allow=never", // no lazy fetch from a promisor remote
	"submodule.recurse=false",
	"gc.auto=0",
	"maintenance.auto=false",
}

// fixedEnv is added to the scrubbed environment of every git run.
var fixedEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_ATTR_NOSYSTEM=1",
	"GIT_PAGER=cat",
	"PAGER=cat",
	"LC_ALL=C",
	"GIT_OPTIONAL_LOCKS=0", // status never refreshes (locks, writes) the index
	"GIT_TERMINAL_PROMPT=0",
	"GIT_NO_REPLACE_OBJECTS=1",
	"GIT_LITERAL_PATHSPECS=1",
	"GIT_NO_LAZY_FETCH=1",
	"GIT_ADVICE=0",
}

// scrubEnv returns env without any GIT_* variable (GIT_DIR, GIT_INDEX_FILE,
// GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS and the rest would redirect or
// reconfigure git), pager and locale variables, plus fixedEnv.
func scrubEnv(env []string) []string {
	out := make([]string, 0, len(env)+len(fixedEnv))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "PAGER" || k == "LESS" || k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, fixedEnv...)
}

// runner runs git for one capture: argv only (no shell), in dir, with the
// scrubbed environment, the safety configuration and the filter-driver
// overrides of the repository at hand.
type runner struct {
	bin     string
	dir     string
	env     []string // the scrubbed environment
	extra   []string // per-run environment (scratch index and object store)
	filters []string // -c overrides that switch off the repository's filter drivers
}

// gitError is a git run that failed: the subcommand, how, and the start of
// what git said.
type gitError struct {
	cmd    string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	if e.stderr != "" {
		return fmt.Sprintf("git %s: %v: %s", e.cmd, e.err, e.stderr)
	}
	return fmt.Sprintf("git %s: %v", e.cmd, e.err)
}

func (e *gitError) Unwrap() error { return e.err }

// errCapped stops copying git's output once the cap is reached; the closed
// pipe then ends git.
var errCapped = errors.New("output cap reached")

// capWriter keeps the first max bytes and fails the write that goes past.
type capWriter struct {
	buf bytes.Buffer
	max int
	hit bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		w.hit = true
		return max(room, 0), errCapped
	}
	return w.buf.Write(p)
}

const stderrKeep = 512

func (r *runner) command(ctx context.Context, args []string) *exec.Cmd {
	full := make([]string, 0, 4+2*len(safeConfig)+len(r.filters)+len(args))
	full = append(full, "--no-pager", "-C", r.dir)
	for _, c := range safeConfig {
		full = append(full, "-c", c)
	}
	full = append(full, r.filters...)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, r.bin, full...)
	cmd.Env = append(r.env[:len(r.env):len(r.env)], r.extra...)
	cmd.Dir = r.dir
	cmd.WaitDelay = time.Second
	return cmd
}

// run runs git args with stdin and returns its stdout. With limit > 0, the
// output stops at limit bytes and capped says so (git is then ended, which
// is not an error).
func (r *runner) run(ctx context.Context, stdin []byte, limit int, args ...string) (out []byte, capped bool, err error) {
	var stdout bytes.Buffer
	cw := capWriter{max: limit}
	var w io.Writer = &stdout
	if limit > 0 {
		w = &cw
	}
	err = r.runWith(ctx, stdin, w, args...)
	if limit > 0 {
		out, capped = cw.buf.Bytes(), cw.hit
		if capped {
			return out, true, nil
		}
	} else {
		out = stdout.Bytes()
	}
	return out, false, err
}

// runWith runs git args with stdin (nil: none), its stdout going to w; a
// failure is a *gitError with the start of what git said.
func (r *runner) runWith(ctx context.Context, stdin []byte, w io.Writer, args ...string) error {
	cmd := r.command(ctx, args)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr capWriter
	stderr.max = stderrKeep
	cmd.Stderr = &stderr
	cmd.Stdout = w
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return &gitError{cmd: args[0], err: err, stderr: strings.TrimSpace(stderr.buf.String())}
	}
	return nil
}

// output runs git args and returns its whole stdout.
func (r *runner) output(ctx context.Context, args ...string) ([]byte, error) {
	out, _, err := r.run(ctx, nil, 0, args...)
	return out, err
}

// input runs git args with stdin and returns its whole stdout.
func (r *runner) input(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	if stdin == nil {
		stdin = []byte{}
	}
	out, _, err := r.run(ctx, stdin, 0, args...)
	return out, err
}

// scratch returns a runner whose index and new objects live in dir, reading
// the repository's objects through the alternates: captures build their
// trees there and never write into the repository.
func (r *runner) scratch(dir, objects string) *runner {
	return r.scratchIndex(dir+string(os.PathSeparator)+"index", dir, objects)
}

// scratchIndex is scratch with the index file at index.
func (r *runner) scratchIndex(index, dir, objects string) *runner {
	c := *r
	c.extra = []string{
		"GIT_INDEX_FILE=" + index,
		"GIT_OBJECT_DIRECTORY=" + dir + string(os.PathSeparator) + "objects",
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + quoteAlternate(objects),
	}
	return &c
}

// quoteAlternate quotes an alternates entry the way git unquotes one (C
// style) when it holds the list separator or starts with a quote.
func quoteAlternate(p string) string {
	if !strings.ContainsAny(p, string(os.PathListSeparator)+"\"\\\n\t") {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// filterOverrides reads the repository's configuration (names only) and
// returns -c arguments that switch off every filter driver it defines, so
// status, diff-index and update-index never run a clean or process filter
// the repository names. A driver name git's -c syntax cannot carry is a
// problem, not a risk to take. includes says the configuration includes
// other files (include.path, includeIf), which a cache cannot watch.
func (r *runner) filterOverrides(ctx context.Context) (args []string, includes bool, err error) {
	out, err := r.output(ctx, "config", "--list", "--name-only", "-z")
	if err != nil {
		var ge *gitError
		// exit 1 with no output: no configuration at all
		if errors.As(err, &ge) && len(out) == 0 && ge.stderr == "" {
			return nil, false, nil
		}
		return nil, false, err
	}
	seen := map[string]bool{}
	for key := range bytes.SplitSeq(out, []byte{0}) {
		k := string(key)
		if strings.HasPrefix(strings.ToLower(k), "include.") || strings.HasPrefix(strings.ToLower(k), "includeif.") {
			includes = true
		}
		rest, ok := strings.CutPrefix(k, "filter.")
		if !ok {
			continue
		}
		dot := strings.LastIndexByte(rest, '.')
		if dot <= 0 {
			continue
		}
		name := rest[:dot]
		if seen[name] {
			continue
		}
		seen[name] = true
		if strings.ContainsAny(name, "=\n") {
			return nil, false, fmt.Errorf("the repository configures a filter driver %q that cannot be switched off safely", name)
		}
		for _, v := range []string{"clean=", "smudge=", "process=", "required=false"} {
			args = append(args, "-c", "filter."+name+"."+v)
		}
	}
	return args, includes, nil
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
)

// The hooks are the suites other issues add. Each is a part of the hooks
// result; one that cannot run here says why ("skipped: ...").
var hooks = []struct {
	name string
	run  func(ctx context.Context, o Options, dir string, p *progress) (*Result, error)
}{
	{"diffcapture", hookDiffCapture},
	{"claude-code", hookClaudeCode},
	{"cluster", hookCluster},
}

func runHooks(ctx context.Context, o Options, dir string) (*Result, error) {
	p := newProgress(o, SuiteHooks)
	res := &Result{Suite: SuiteHooks, Params: "the suites other issues add"}
	for _, h := range hooks {
		hdir := filepath.Join(dir, h.name)
		if err := os.MkdirAll(hdir, 0o700); err != nil {
			return nil, err
		}
		t0 := time.Now()
		part, err := h.run(ctx, o, hdir, p)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			part = &Result{Suite: h.name}
			part.check("ran", false, "%v", err)
		}
		part.ElapsedSeconds = time.Since(t0).Seconds()
		res.Parts = append(res.Parts, part)
	}
	return res, nil
}

// ---- diff capture against bare git ----

// diffIterations is how many turns the diff capture hook captures (each
// alternated with the bare git commands of the same turn).
const diffIterations = 10

// genRepo is a generated git repository of n Go files in 100-file
// packages, one commit, with one file dirty before every turn.
type genRepo struct {
	dir string
	env []string
}

func genPath(i int) string { return fmt.Sprintf("pkg%03d/file%05d.go", i/100, i) }
func genContent(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package pkg%03d\n\n", i/100)
	for k := range 12 {
		fmt.Fprintf(&b, "// F%d_%d returns a number the benchmark never reads.\nfunc F%d_%d() int { return %d }\n\n", i, k, i, k, i*k)
	}
	return b.String()
}

func (r *genRepo) git(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = r.dir
	cmd.Env = r.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 && len(args) > 0 && args[0] == "diff" {
			return out, nil // "differs"
		}
		return out, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func (r *genRepo) write(rel, content string) error {
	p := filepath.Join(r.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func generateRepo(ctx context.Context, dir string, n int) (*genRepo, error) {
	r := &genRepo{dir: dir, env: append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@test.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@test.invalid")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, nil, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	for i := range n {
		if err := r.write(genPath(i), genContent(i)); err != nil {
			return nil, err
		}
	}
	if _, err := r.git(ctx, nil, "add", "-A"); err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, nil, "commit", "-q", "-m", "generated"); err != nil {
		return nil, err
	}
	// dirty before every turn: the baseline has to snapshot it
	d := n / 2
	return r, r.write(genPath(d), genContent(d)+"// dirty before the turn\n")
}

// The turn every iteration replays: three files modified, two new
// untracked files, one deleted; then undone.
func diffTurn(r *genRepo, n int, undo bool) error {
	mod := []int{0, n / 3, n - 2}
	for _, i := range mod {
		c := genContent(i)
		if !undo {
			c += "// changed by the turn\n"
		}
		if err := r.write(genPath(i), c); err != nil {
			return err
		}
	}
	for _, p := range []string{"pkg000/new_a.go", "pkg000/new_b.go"} {
		var err error
		if undo {
			err = os.Remove(filepath.Join(r.dir, p))
		} else {
			err = r.write(p, "package pkg000\n")
		}
		if err != nil {
			return err
		}
	}
	del := n / 4
	if undo {
		return r.write(genPath(del), genContent(del))
	}
	return os.Remove(filepath.Join(r.dir, filepath.FromSlash(genPath(del))))
}

// bareGitTurn runs the git commands seed 000 §6 names, with nothing
// around them: HEAD, status and the hashes of the dirty files before the
// turn; diff -M against the start commit (numstat and patch), status again
// and diff --no-index for each new untracked file after it. It returns the
// time spent in git (the turn itself excluded).
func bareGitTurn(ctx context.Context, r *genRepo, n int) (time.Duration, error) {
	t0 := time.Now()
	head, err := r.git(ctx, nil, "rev-parse", "-q", "--verify", "HEAD")
	if err != nil {
		return 0, err
	}
	st, err := r.git(ctx, nil, "status", "--porcelain", "-z", "-uall")
	if err != nil {
		return 0, err
	}
	var dirty []byte
	for _, rec := range bytes.Split(st, []byte{0}) {
		if len(rec) > 3 {
			dirty = append(append(dirty, rec[3:]...), '\n')
		}
	}
	if _, err := r.git(ctx, dirty, "hash-object", "--stdin-paths"); err != nil {
		return 0, err
	}
	before := time.Since(t0)
	if err := diffTurn(r, n, false); err != nil {
		return 0, err
	}
	t1 := time.Now()
	h := strings.TrimSpace(string(head))
	if _, err := r.git(ctx, nil, "diff", "--no-ext-diff", "--no-textconv", "-M", "-z", "--numstat", h); err != nil {
		return 0, err
	}
	if _, err := r.git(ctx, nil, "diff", "--no-ext-diff", "--no-textconv", "-M", h); err != nil {
		return 0, err
	}
	st2, err := r.git(ctx, nil, "status", "--porcelain", "-z", "-uall")
	if err != nil {
		return 0, err
	}
	for _, rec := range bytes.Split(st2, []byte{0}) {
		if bytes.HasPrefix(rec, []byte("?? ")) {
			if _, err := r.git(ctx, nil, "diff", "--no-ext-diff", "--no-textconv", "--no-index", "/dev/null", string(rec[3:])); err != nil {
				return 0, err
			}
		}
	}
	after := time.Since(t1)
	return before + after, diffTurn(r, n, true)
}

// captureTurn captures the same turn with diffcapture's Git, returning the
// time spent in Begin and Finish and the diff.
func captureTurn(ctx context.Context, r *genRepo, n int) (time.Duration, messages.TurnDiff, error) {
	g := diffcapture.NewGit(r.dir)
	defer g.Close() // its snapshot's scratch folder, after the timing
	t0 := time.Now()
	base, err := g.Begin(ctx)
	if err != nil {
		return 0, messages.TurnDiff{}, err
	}
	before := time.Since(t0)
	if err := diffTurn(r, n, false); err != nil {
		return 0, messages.TurnDiff{}, err
	}
	t1 := time.Now()
	d := g.Finish(ctx, base, nil)
	after := time.Since(t1)
	return before + after, d, diffTurn(r, n, true)
}

func hookDiffCapture(ctx context.Context, o Options, dir string, p *progress) (*Result, error) {
	n := o.DiffFiles
	res := &Result{Suite: "diffcapture", Params: fmt.Sprintf("per-turn git capture vs the bare git commands of the same turn, %d-file generated repository, %d turns alternated", n, diffIterations)}
	if _, err := exec.LookPath("git"); err != nil {
		res.Skipped = "git is not on PATH"
		return res, nil
	}
	p.printf("diffcapture: generating a %d-file repository", n)
	r, err := generateRepo(ctx, filepath.Join(dir, "repo"), n)
	if err != nil {
		return nil, err
	}
	// warm the page cache for both
	if _, _, err := captureTurn(ctx, r, n); err != nil {
		return nil, err
	}
	if _, err := bareGitTurn(ctx, r, n); err != nil {
		return nil, err
	}
	p.printf("diffcapture: %d turns", diffIterations)
	var capLat, bareLat latencies
	var wrong failures
	for i := range diffIterations {
		d, diff, err := captureTurn(ctx, r, n)
		if err != nil {
			return nil, err
		}
		capLat.add(d)
		if diff.Source != messages.DiffGit || diff.Warning != "" || len(diff.Files) != 6 {
			wrong.add("turn %d: source %s, %d files, warning %q (want git, the 6 files the turn changed, none)", i+1, diff.Source, len(diff.Files), diff.Warning)
		}
		b, err := bareGitTurn(ctx, r, n)
		if err != nil {
			return nil, err
		}
		bareLat.add(b)
	}
	wrong.report(res, "captures complete", fmt.Sprintf("every capture saw exactly the 6 changed files (3 modified, 2 new, 1 deleted) from git, with no warning, ignoring the file dirty before the turn"))
	c, b := capLat.summary(), bareLat.summary()
	res.vs("capture per turn p50", ms(c.p50), UnitMs, "bare git commands p50", ms(b.p50))
	res.vs("capture per turn max", ms(c.mx), UnitMs, "bare git commands max", ms(b.mx))
	res.note("capture is diffcapture.Git's Begin (before the turn) plus Finish (after it); the turn's own file changes are not timed on either side")
	return res, nil
}

// ---- claude-code: per-line overhead against the CLI's own turn ----

// claudeTurns is how many turns the claude-code hook times on each side.
const claudeTurns = 20

// claudeScenario: each "bench" prompt gets thinking, a text and a Glob
// call (read-only: no permission asked), then a closing text.
func claudeScenario() *modelmock.Scenario {
	return &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "bench"}, Steps: []modelmock.Step{
		{Thinking: "a short plan", Text: "Looking.", Tool: &modelmock.ToolCall{Name: "Glob", Input: json.RawMessage(`{"pattern":"*.md"}`)}},
		{Text: "Done: {{result}}"},
	}}}}
}

func hookClaudeCode(ctx context.Context, o Options, dir string, p *progress) (*Result, error) {
	res := &Result{Suite: "claude-code", Params: fmt.Sprintf("a turn through the runtime vs the same turn of the bare CLI, %d turns each, against modelmock", claudeTurns)}
	bin := o.ClaudeBin
	if bin == "" {
		res.Skipped = "CODESESSION_CLAUDE_BIN is not set (it names the pinned claude " + claudecode.PinnedVersion + " binary)"
		return res, nil
	}
	vctx, cancel := context.WithTimeout(ctx, time.Minute)
	out, err := exec.CommandContext(vctx, bin, "--version").Output()
	cancel()
	if err != nil {
		res.Skipped = fmt.Sprintf("%s --version failed: %v", bin, err)
		return res, nil
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, claudecode.PinnedVersion+" ") && v != claudecode.PinnedVersion {
		res.Skipped = fmt.Sprintf("%s is %q, not the pinned %s", bin, v, claudecode.PinnedVersion)
		return res, nil
	}
	mock, err := modelmock.Start(nil, claudeScenario())
	if err != nil {
		return nil, err
	}
	defer mock.Close()
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(cwd, "README.md"), []byte("# bench\n"), 0o600)
	env := map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-bench", "HOME": filepath.Join(dir, "claude-home")}

	p.printf("claude-code: %d turns through the runtime", claudeTurns)
	var events eventCounter
	b, err := openRuntime(o, filepath.Join(dir, "home"), transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin))), env,
		actors.WithEventListener(events.listen))
	if err != nil {
		return nil, err
	}
	var rtLat latencies
	var errs failures
	octx, ocancel := opCtx(ctx)
	defer ocancel()
	st, err := b.rt.Start(octx, scope, messages.Start{Brief: "bench 0", Cwd: cwd, Model: "claude-mock-1"})
	sid := st.SessionID
	if err == nil {
		var r messages.TurnResult
		r, err = b.rt.ReadTurn(octx, scope, messages.ReadTurn{SessionID: sid})
		if err == nil {
			err = expectKind(r, messages.KindTurnComplete)
		}
	}
	if err != nil {
		errs.add("first turn: %v", err)
	}
	events.reset()
	for i := 1; i <= claudeTurns && errs.n == 0; i++ {
		t0 := time.Now()
		if _, err := b.rt.Guide(octx, scope, messages.Guide{SessionID: sid, Text: fmt.Sprintf("bench %d", i)}); err != nil {
			errs.add("guide %d: %v", i, err)
			break
		}
		r, err := b.rt.ReadTurn(octx, scope, messages.ReadTurn{SessionID: sid})
		if err == nil {
			err = expectKind(r, messages.KindTurnComplete)
		}
		if err != nil {
			errs.add("turn %d: %v", i, err)
			break
		}
		rtLat.since(t0)
	}
	agentEvents := events.n()
	if sid != "" {
		if _, err := b.rt.Stop(octx, scope, messages.Stop{SessionID: sid}); err != nil {
			errs.add("stop: %v", err)
		}
	}
	if err := b.close(); err != nil {
		errs.add("close: %v", err)
	}
	errs.report(res, "runtime turns completed", fmt.Sprintf("%d turns through the runtime, each turn_complete", claudeTurns))
	if sid != "" {
		if _, err := b.verify(ctx, []string{sid}, logExpect{turns: claudeTurns + 1, clarifications: 0, reason: messages.ReleaseExplicit, status: messages.StatusEnded}, res); err != nil {
			return nil, err
		}
	}

	p.printf("claude-code: %d turns of the bare CLI", claudeTurns)
	bare, lines, err := bareClaudeTurns(ctx, bin, cwd, env, filepath.Join(dir, "bare-home"))
	var bareErrs failures
	if err != nil {
		bareErrs.add("%v", err)
	}
	bareErrs.report(res, "bare CLI turns completed", fmt.Sprintf("%d turns of the bare CLI, each ending with its result line", claudeTurns))
	rs, bs := rtLat.summary(), bare.summary()
	res.vs("turn p50", ms(rs.p50), UnitMs, "bare CLI turn p50", ms(bs.p50))
	res.vs("turn max", ms(rs.mx), UnitMs, "bare CLI turn max", ms(bs.mx))
	if lines > 0 && bs.n > 0 && rs.n > 0 {
		perTurn := float64(lines) / float64(bs.n)
		res.row("CLI stdout lines per turn", perTurn, UnitCount)
		res.row("agent events per turn (runtime)", float64(agentEvents)/float64(rs.n), UnitCount)
		res.row("runtime overhead per CLI line ((turn p50 - bare p50) / lines)", ms(rs.p50-bs.p50)/perTurn, UnitMs)
	}
	res.note("a runtime turn is guide to read-turn (the CLI process, the transport, the session, events made durable); a bare turn is writing the user message on the CLI's stdin to reading its result line, same flags but no permission-prompt tool")
	return res, nil
}

// eventCounter counts the agent events the runtime emits.
type eventCounter struct {
	mu    sync.Mutex
	count int
}

func (c *eventCounter) listen(_ string, ev messages.PersistedEvent) {
	if ev.Event.Type.Annotation() {
		return
	}
	c.mu.Lock()
	c.count++
	c.mu.Unlock()
}

func (c *eventCounter) reset() {
	c.mu.Lock()
	c.count = 0
	c.mu.Unlock()
}

func (c *eventCounter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// bareClaudeTurns drives one persistent claude process by hand: a warm-up
// turn, then claudeTurns timed ones; it returns their latencies and the
// stdout lines of the timed turns.
func bareClaudeTurns(ctx context.Context, bin, cwd string, env map[string]string, home string) (*latencies, int, error) {
	lat := &latencies{}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return lat, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--permission-mode", "default", "--model", "claude-mock-1")
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_SDK_READS_SESSION_STATE=1")
	if os.Geteuid() == 0 {
		cmd.Env = append(cmd.Env, "IS_SANDBOX=1")
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "HOME="+home)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return lat, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return lat, 0, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return lat, 0, err
	}
	defer func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	turn := func(i int) (int, error) {
		msg, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": fmt.Sprintf("bench %d", i)}})
		if _, err := stdin.Write(append(msg, '\n')); err != nil {
			return 0, err
		}
		lines := 0
		for sc.Scan() {
			lines++
			var head struct {
				Type    string `json:"type"`
				IsError bool   `json:"is_error"`
			}
			if json.Unmarshal(sc.Bytes(), &head) == nil && head.Type == "result" {
				if head.IsError {
					return lines, fmt.Errorf("turn %d: an error result", i)
				}
				return lines, nil
			}
		}
		if err := sc.Err(); err != nil {
			return lines, err
		}
		return lines, fmt.Errorf("turn %d: the CLI exited before its result", i)
	}
	if _, err := turn(0); err != nil {
		return lat, 0, err
	}
	total := 0
	for i := 1; i <= claudeTurns; i++ {
		t0 := time.Now()
		n, err := turn(i)
		if err != nil {
			return lat, total, err
		}
		lat.since(t0)
		total += n
	}
	return lat, total, nil
}

// ---- cluster routing ----

func hookCluster(ctx context.Context, o Options, dir string, p *progress) (*Result, error) {
	return &Result{Suite: "cluster", Params: "an op routed to the owning node vs a raw hollywood remote request round trip",
		Skipped: "measured by its own suite: codesession bench cluster"}, nil
}

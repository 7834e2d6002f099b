package grok

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The fake grok: this test binary, run with envFake set, replays exactly
// the shapes seed 003 documents for grok 0.2.93 (it is not the CLI, which
// cannot be installed here):
//
//   - argv: -p <prompt> --output-format json [--permission-mode M] [-m X]
//     [--reasoning-effort E] (-s <uuid> | --resume <uuid>); --tools makes
//     session creation fail with the documented RequirementError; -s needs
//     a valid UUID not already used, --resume one that exists;
//   - success: one PRETTY-PRINTED object {"text","stopReason","sessionId",
//     "requestId","thought"} with no type field;
//   - failure: {"type":"error","message":"Internal error: ..."}, exit 1;
//   - a write under plan, default, acceptEdits or dontAsk is cancelled
//     (stopReason "Cancelled", the file untouched, text empty); under auto
//     and bypassPermissions it happens and the turn ends "EndTurn".
//
// What it does is keyed on the prompt by a scenario file (envFakeScenario):
// rules {"match": substring, "write": {"path","content"}, "sleep": secs,
// "error": message, "reply": text}. Every argv is appended as a JSON line
// to envFakeLog, so tests assert what the CLI actually received.
const (
	envFake         = "CODESESSION_FAKE_GROK"
	envFakeScenario = "CODESESSION_FAKE_GROK_SCENARIO"
	envFakeLog      = "CODESESSION_FAKE_GROK_LOG"
)

type fakeRule struct {
	Match string `json:"match"`
	Reply string `json:"reply,omitempty"`
	Write *struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"write,omitempty"`
	Sleep float64 `json:"sleep,omitempty"`
	Error string  `json:"error,omitempty"`
}

func TestMain(m *testing.M) {
	if os.Getenv(envFake) == "1" {
		os.Exit(fakeGrok(os.Args[1:]))
	}
	os.Exit(m.Run())
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func fakeGrok(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("grok 0.2.93 (f00f96316d)")
		return 0
	}
	if log := os.Getenv(envFakeLog); log != "" {
		f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			b, _ := json.Marshal(args)
			fmt.Fprintf(f, "%s\n", b)
			f.Close()
		}
	}
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			fmt.Fprintf(os.Stderr, "error: unexpected argument '%s' found\n", a)
			return 2
		}
		if i+1 >= len(args) {
			fmt.Fprintf(os.Stderr, "error: a value is required for '%s <VALUE>' but none was supplied\n", a)
			return 2
		}
		flags[a] = args[i+1]
		i++
	}
	fail := func(msg string) int {
		b, _ := json.MarshalIndent(map[string]string{"type": "error", "message": msg}, "", "  ")
		fmt.Println(string(b))
		return 1
	}
	if _, ok := flags["--tools"]; ok {
		return fail(`Internal error: Requirements unsatisfied: [RequirementError { tool: "GrokBuild:run_terminal_cmd", message: "auto_background_on_timeout requires enabled_background to be true" }]`)
	}
	if flags["--output-format"] != "json" {
		fmt.Fprintln(os.Stderr, "fake grok: only --output-format json is replayed")
		return 2
	}
	mode := flags["--permission-mode"]
	switch mode {
	case "", "default", "plan", "acceptEdits", "auto", "bypassPermissions", "dontAsk":
	default:
		fmt.Fprintf(os.Stderr, "error: invalid value '%s' for '--permission-mode <MODE>'\n", mode)
		return 2
	}
	if e, ok := flags["--reasoning-effort"]; ok {
		switch e {
		case "none", "minimal", "low", "medium", "high", "xhigh", "max":
		default:
			fmt.Fprintf(os.Stderr, "error: invalid value '%s' for '--reasoning-effort <LEVEL>'\n", e)
			return 2
		}
	}
	dir := filepath.Join(os.Getenv("HOME"), ".grok", "sessions")
	_ = os.MkdirAll(dir, 0o700)
	id, resume := flags["-s"], false
	if r, ok := flags["--resume"]; ok {
		id, resume = r, true
	}
	sessFile := filepath.Join(dir, id+".jsonl")
	_, statErr := os.Stat(sessFile)
	switch {
	case id == "":
		id = "0b3a1f4e-0000-4000-8000-000000000000"
		sessFile = filepath.Join(dir, id+".jsonl")
	case !uuidRE.MatchString(id):
		return fail("Internal error: session id must be a valid UUID")
	case !resume && statErr == nil:
		return fail("Internal error: session " + id + " already exists; use --resume")
	case resume && statErr != nil:
		return fail("Internal error: no session " + id + " to resume")
	}
	prompt := flags["-p"]
	if f, err := os.OpenFile(sessFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		b, _ := json.Marshal(prompt)
		fmt.Fprintf(f, "%s\n", b)
		f.Close()
	}
	var rules []fakeRule
	if p := os.Getenv(envFakeScenario); p != "" {
		b, err := os.ReadFile(p)
		if err == nil {
			_ = json.Unmarshal(b, &rules)
		}
	}
	text, stop := "PONG: "+prompt, "EndTurn"
	for _, r := range rules {
		if !strings.Contains(prompt, r.Match) {
			continue
		}
		if r.Sleep > 0 {
			time.Sleep(time.Duration(r.Sleep * float64(time.Second)))
		}
		if r.Error != "" {
			return fail(r.Error)
		}
		text = r.Reply
		if r.Write != nil {
			if mode == "auto" || mode == "bypassPermissions" {
				_ = os.WriteFile(r.Write.Path, []byte(r.Write.Content), 0o644)
			} else {
				text, stop = "", "Cancelled"
			}
		}
		break
	}
	b, _ := json.MarshalIndent(map[string]string{"text": text, "stopReason": stop, "sessionId": id,
		"requestId": "5d1c7e0a-1111-4222-8333-444455556666", "thought": "The user wants a reply."}, "", "  ")
	fmt.Println(string(b))
	return 0
}

// fakeGrokTransport returns a transport running the fake with rules, and
// the path of its argv log.
func fakeGrokTransport(t testing.TB, rules []fakeRule, opts ...Option) (*Transport, string) {
	t.Helper()
	dir := t.TempDir()
	sc := filepath.Join(dir, "scenario.json")
	b, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "argv.jsonl")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := append([]Option{WithBinary(exe), WithEnv(envFake+"=1", envFakeScenario+"="+sc, envFakeLog+"="+log)}, opts...)
	return New(o...), log
}

// argvLog reads what the fake received, one argv per turn.
func argvLog(t testing.TB, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var a []string
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// flagValue is the value after flag in argv, and whether it is there.
func flagValue(argv []string, flag string) (string, bool) {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == flag {
			return argv[i+1], true
		}
	}
	return "", false
}

// Command codesession is codesession's CLI ops console: it drives coding
// agents as supervised sessions in the embedded runtime (actors.Runtime).
//
//	codesession run [flags] BRIEF    start, drive and stop one session
//	codesession backends [--json]    the capability matrix with availability
//	codesession outcomes | lessons   the learning loop: outcomes, lessons, the injection block
//	codesession try [--backend B]    one short real session against a scripted model, to try a backend
//	codesession demo [--yes]         the whole loop, offline, against a scripted model
//	codesession modelmock            the scripted model server on 127.0.0.1
//	codesession serve                the daemon: HTTP control plane and SSE feed
//	codesession mcp                  the code_session op tool over MCP on stdio
//	codesession start|read|answer|guide|posture|interrupt|stop|ls|show|diff|tail|resume|attach
//	                                 the ops console, talking to a daemon
//	codesession version | help
//
// main only wires the process to run(ctx, args, getenv, stdin, stdout,
// stderr), which returns the exit code: 0 success, 1 the session failed or
// ended in error, 2 a usage or configuration error (printed with a
// "Try: codesession <cmd> --help" hint). Exit codes are decided in one place,
// exitCode.
//
// Each command lives in its own file with its own pflag.FlagSet. Parsing
// (parseRunFlags, ...) is apart from running (runCmd.exec, ...), so tests can
// build a command's options without flags. Configuration flows one way:
// defaults, then a JSON file (--config, else $CODESESSION_CONFIG, else
// <home>/config.json when present), then CODESESSION_* variables, then
// flags, then config.Validate.
//
// Concurrency: run is safe to call from several goroutines with separate
// streams; each call builds its own runtime. Only main installs a
// process-wide slog logger.
//
// Testing: the tests drive run with argument lists and buffers against the
// scripted backend (scenario files through --env CODESESSION_SCRIPT=...);
// hygiene_test.go holds the module's dependency direction and package-doc
// rules with `go list`.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/bench"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

func main() {
	bench.FeedChildMain() // returns unless this process is the feed bench's subscribers' child
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	installLogger = func(w io.Writer, level, format string) {
		slog.SetDefault(newLogger(w, cmp.Or(level, "info"), format))
	}
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// installLogger, when set, routes the runtime's slog output once the config
// is known. Only main sets it: the default logger is process-wide.
var installLogger func(w io.Writer, level, format string)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	// exitCredentials: founder credentials in the environment refused a
	// start (seed 002's runner exits 20 for the same).
	exitCredentials = 20
)

// streams is what a command reads and writes; run fills it from its arguments.
type streams struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand: parse turns its arguments into a runner
// (returning *usageError for bad ones), and the runner does the work.
type command struct {
	name    string
	summary string
	usage   string // the synopsis after "codesession "
	flags   func() *pflag.FlagSet
	parse   func(args []string) (runner, error)
}

type runner interface {
	exec(ctx context.Context, s *streams) error
}

func commands() []command {
	return []command{runCommand(),
		serveCommand(), startCommand(), readCommand(), answerCommand(), guideCommand(), postureCommand(),
		interruptCommand(), stopCommand(), lsCommand(), showCommand(), diffCommand(), tailCommand(), resumeCommand(), attachCommand(), delegateCommand(), delegationsCommand(),
		backendsCommand(), outcomesCommand(), lessonsCommand(), approvalsCommand(), capabilitiesCommand(), demoCommand(), tryCommand(), modelmockCommand(), benchCommand(), mcpCommand(),
		scopeCommand(), pruneCommand(), configCommand(), completionCommand(), versionCommand(), helpCommand()}
}

// nearestCommand is the command whose name is within two edits of name
// (the closest, if several), or "".
func nearestCommand(name string) string {
	best, bestDist := "", 3
	for _, c := range commands() {
		if d := editDistance(name, c.name); d < bestDist {
			best, bestDist = c.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run is the whole CLI: it parses args (without the program name), runs the
// command and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	s := &streams{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		writeHelp(stderr)
		return report(s, "", &usageError{cmd: "help", err: errors.New("no command given")})
	}
	name := args[0]
	switch name {
	case "-h", "--help":
		writeHelp(stdout)
		return exitOK
	case "--version":
		return report(s, "version", versionCmd{}.exec(ctx, s))
	}
	cmd, ok := findCommand(name)
	if !ok {
		msg := fmt.Sprintf("unknown command %q", name)
		if near := nearestCommand(name); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return report(s, "", &usageError{cmd: "help", err: errors.New(msg)})
	}
	r, err := cmd.parse(args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		writeCommandHelp(stdout, cmd)
		return exitOK
	}
	if err != nil {
		return report(s, name, err)
	}
	return report(s, name, r.exec(ctx, s))
}

// newFlagSet returns a command's flag set: errors are returned, never
// printed or fatal, and help is printed by run.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// parseFlags parses args into fs, turning flag errors into usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return &usageError{cmd: fs.Name(), err: err}
	}
	return nil
}

// usageError is a bad command line or configuration: exit 2 with a hint.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// failedError says the session failed or ended in error; what happened has
// already been printed.
type failedError struct{ reason string }

func (e *failedError) Error() string { return e.reason }

// exitCode is the one place errors become exit codes.
func exitCode(err error) int {
	var ue *usageError
	var me *messages.Error
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &me) && me.Field == transports.FieldFounderCredentials:
		return exitCredentials
	default:
		return exitFailed
	}
}

// report prints err (with the Try hint for usage errors) and returns the
// exit code.
func report(s *streams, cmd string, err error) int {
	code := exitCode(err)
	if err == nil {
		return code
	}
	prefix := "codesession"
	if cmd != "" {
		prefix += " " + cmd
	}
	for _, line := range strings.Split(humanMessage(err), "\n") {
		fmt.Fprintf(s.stderr, "%s: %s\n", prefix, line)
	}
	if h := hintFor(cmd, err); h != "" {
		fmt.Fprintf(s.stderr, "hint: %s\n", h)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.cmd == "help" || ue.cmd == "" {
			fmt.Fprintln(s.stderr, "Try: codesession help")
		} else {
			fmt.Fprintf(s.stderr, "Try: codesession %s --help\n", ue.cmd)
		}
	}
	return code
}

// rejected turns a start refused for what the user asked (a bad field, an
// unknown backend, a posture above its ceiling, an unsupported option) into
// a usage error; other errors pass through. A not_found (no such session)
// is not a usage error: exit 1, with no "Try: --help".
func rejected(cmd string, err error) error {
	var me *messages.Error
	if errors.As(err, &me) && me.Field == transports.FieldFounderCredentials {
		return err // not a usage error: the daemon's environment, exit 20
	}
	switch messages.ErrorCode(err) {
	case messages.CodeInvalid, messages.CodeCeilingExceeded, messages.CodeUnsupported:
		return &usageError{cmd: cmd, err: err}
	case messages.CodeNotFound:
		if errors.As(err, &me) && me.Op == messages.OpStart {
			return &usageError{cmd: cmd, err: err} // no session yet: the backend it names is unknown
		}
	}
	return err
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

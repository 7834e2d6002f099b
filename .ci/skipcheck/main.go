// Command skipcheck reads `go test -json` on stdin, prints go test's own
// output as it comes (the ok/FAIL lines included), then how many tests
// were skipped. With -strict (CI=true) it exits 1 when a test skipped
// that is not allowed below by name: on the CI machine everything a test
// needs is installed, so a skip there is a test that never ran.
//
// It lives under .ci (ignored by ./...) and runs with
// `go run ./.ci/skipcheck`; it is not a product command.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
)

const module = "github.com/codesession/codesession/"

// allowance is a skip that may stay under CI, by package and test name,
// with the reason it is no lost test.
type allowance struct {
	pkg  *regexp.Regexp // the package path after the module path
	test *regexp.Regexp // the full test name (subtests after '/')
	why  string
}

var allowed = []allowance{
	{regexp.MustCompile(`^actors$`), regexp.MustCompile(`^TestCrashChild$`),
		"the crash suite's child side: it runs when TestCrashSuite re-executes the test binary"},
	{regexp.MustCompile(`^actors$`), regexp.MustCompile(`^TestDriverKillChild$`),
		"the driver kill test's child side: it runs when TestKilledDriversSessionsAreReleasedAtTheNextStart re-executes the test binary"},
	{regexp.MustCompile(`^transports/proc$`), regexp.MustCompile(`^TestHelperNet$`),
		"TestConfineNetwork's child side: it runs when that test re-executes the test binary inside the Landlock domain"},
	{regexp.MustCompile(`^transports/transporttest$`), regexp.MustCompile(`^TestMutants$`),
		"the mutant run's child side: it runs when TestSuiteCatchesMutants re-executes the test binary"},
	{regexp.MustCompile(`^transports/[a-z]+$`), regexp.MustCompile(`^TestConformance[A-Za-z]*/.+`),
		"a conformance case the backend cannot have (in-process: no executable, no stdout; a capability its descriptor does not offer); the suite says which"},
	{regexp.MustCompile(`^actors/store/filestore$`), regexp.MustCompile(`^FuzzTornTail/.+`),
		"a fuzz input whose torn tail forges a well-formed next event: not a torn tail"},
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// skip is one skipped test and the last line it logged (its reason).
type skip struct {
	pkg, test, reason string
	allowedBy         string
}

func main() {
	strict := flag.Bool("strict", false, "exit 1 on a skip not allowed by name (CI=true)")
	flag.Parse()
	skips, stuck, err := scan(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(2)
	}
	bad := report(os.Stdout, skips)
	// last, where a log cut to its head and tail still shows it
	reportHung(os.Stdout, stuck)
	if bad > 0 && *strict {
		fmt.Printf("skipcheck: FAIL: %d test(s) skipped under CI=true that no allowance names (.ci/skipcheck/main.go): install what they need, or make them fail\n", bad)
		os.Exit(1)
	}
}

// hung is a test that never finished: the one a package's panic or
// timeout stopped, with what it logged before the panic.
type hung struct {
	pkg, test string
	panic     string   // "panic: test timed out after 30m0s", or the panic's first line
	log       []string // its last lines before the panic
	stacks    []string // the goroutines in the project's code, grouped
}

// hungLogLines is how many of a hung test's lines before its panic the
// closing summary repeats.
const hungLogLines = 10

// scan copies go test's output to out as go test without -v shows it: a
// test's own lines only when it fails (or never finishes: a panic or a
// timeout), every package line (ok, FAIL, panics) at once. It collects
// the skips, and the tests a panic or timeout stopped. A test that never
// finished without logging anything of its own (paused or waiting for
// its parallel turn when the package stopped) gets a name in one line per
// package, not its RUN and PAUSE lines. A line that is not JSON (the go
// command's own messages) is copied as it is.
func scan(in io.Reader, out io.Writer) ([]skip, []hung, error) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	held := map[string]*strings.Builder{} // package + test -> its lines so far
	var order []string                    // keys of held, in arrival order
	last := map[string]string{}           // package + test -> its last log line
	var skips []skip
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			w.Write(line)
			w.WriteByte('\n')
			w.Flush()
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "build-output":
			w.WriteString(ev.Output)
		case "output":
			if ev.Test == "" {
				if ev.Output == "PASS\n" {
					continue // go test without -v shows only the ok line
				}
				w.WriteString(ev.Output)
				w.Flush() // a 30-minute run's log shows each package as it ends
				continue
			}
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
				order = append(order, key)
			}
			b.WriteString(ev.Output)
			if s := strings.TrimSpace(ev.Output); s != "" && !strings.HasPrefix(s, "--- ") && !strings.HasPrefix(s, "=== ") {
				last[key] = s
			}
		case "fail":
			if b := held[key]; b != nil {
				w.WriteString(b.String())
				w.Flush()
			}
			delete(held, key)
		case "pass":
			delete(held, key)
		case "skip":
			delete(held, key)
			if ev.Test == "" {
				continue // a package with no test files
			}
			skips = append(skips, classify(skip{pkg: ev.Package, test: ev.Test, reason: last[key]}))
		}
	}
	var hungs []hung
	waiting := map[string][]string{} // package -> tests that never ran a line of their own
	var pkgs []string
	for _, key := range order {
		b := held[key]
		if b == nil {
			continue
		}
		pkg, test, _ := strings.Cut(key, " ")
		if !ownLines(b.String()) {
			if waiting[pkg] == nil {
				pkgs = append(pkgs, pkg)
			}
			waiting[pkg] = append(waiting[pkg], test)
			continue
		}
		fmt.Fprintf(w, "skipcheck: the output of %s, which never finished:\n%s", key, b.String())
		if h, ok := stopped(pkg, test, b.String()); ok {
			hungs = append(hungs, h)
		}
	}
	for _, pkg := range pkgs {
		fmt.Fprintf(w, "skipcheck: %s: %d test(s) never finished without a line of their own (paused or waiting their turn): %s\n",
			pkg, len(waiting[pkg]), strings.Join(waiting[pkg], " "))
	}
	return skips, hungs, sc.Err()
}

// ownLines reports whether out has a line other than go test's own
// === RUN, === PAUSE and === CONT.
func ownLines(out string) bool {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== ") {
			return true
		}
	}
	return false
}

// stopped finds the panic in a never-finished test's output (go test
// puts a package's timeout panic and its goroutines in the running
// test's output) and the lines the test logged before it.
func stopped(pkg, test, out string) (hung, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic: ") {
			continue
		}
		h := hung{pkg: pkg, test: test, panic: l}
		before := lines[:i]
		if len(before) > hungLogLines {
			before = before[len(before)-hungLogLines:]
		}
		h.log = before
		h.stacks = projectStacks(lines[i:])
		return h, true
	}
	return hung{}, false
}

// reportHung prints, after everything else, each test a panic or a
// timeout stopped: where the goroutines in the project's code were, its
// last lines before the panic, and last of all a line naming its package,
// its name and the panic (a log cut to its head and tail keeps the end).
// The whole goroutine dump stays above, in the test's output.
func reportHung(out io.Writer, hs []hung) {
	for _, h := range hs {
		fmt.Fprintln(out)
		if len(h.stacks) > 0 {
			fmt.Fprintf(out, "skipcheck: where the goroutines in the project's code were (count, state, innermost project frame):\n")
			for _, l := range h.stacks {
				fmt.Fprintf(out, "  | %s\n", l)
			}
		}
		fmt.Fprintf(out, "skipcheck: its last %d line(s) before the panic:\n", len(h.log))
		for _, l := range h.log {
			fmt.Fprintf(out, "  | %s\n", l)
		}
		fmt.Fprintf(out, "skipcheck: %s %s never finished: %s\n", strings.TrimPrefix(h.pkg, module), h.test, h.panic)
	}
}

// stackGroups is how many groups of goroutines the closing summary shows.
const stackGroups = 20

// projectStacks groups a panic's goroutine dump by each goroutine's state
// and innermost frame in the project's code (goroutines with none are
// left out): the most common first, at most stackGroups.
func projectStacks(dump []string) []string {
	count := map[string]int{}
	var keys []string
	state, found := "", false
	for i, l := range dump {
		if strings.HasPrefix(l, "goroutine ") {
			// goroutine 7 [chan receive, 29 minutes]:
			state, found = "", false
			if a, b := strings.IndexByte(l, '['), strings.LastIndexByte(l, ']'); a >= 0 && b > a {
				state, _, _ = strings.Cut(l[a+1:b], ",")
			}
			continue
		}
		// a frame's function line (its file is the next, indented); not
		// "created by", which says where the goroutine began
		if found || state == "" || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "created by ") || !strings.Contains(l, module) {
			continue
		}
		found = true
		fn := strings.TrimPrefix(l, module)
		if j := strings.LastIndexByte(fn, '('); j > 0 {
			fn = fn[:j] // the arguments; a method's receiver stays: cluster.(*Node).Close
		}
		at := ""
		if i+1 < len(dump) {
			at, _, _ = strings.Cut(strings.TrimSpace(dump[i+1]), " +")
			at = path.Base(at) // feed.go:123: the function names the package
		}
		key := state + "  " + fn + "  " + at
		if count[key] == 0 {
			keys = append(keys, key)
		}
		count[key]++
	}
	sort.SliceStable(keys, func(i, j int) bool { return count[keys[i]] > count[keys[j]] })
	var out []string
	for i, k := range keys {
		if i == stackGroups {
			out = append(out, fmt.Sprintf("... and %d more group(s)", len(keys)-stackGroups))
			break
		}
		out = append(out, fmt.Sprintf("%5d  %s", count[k], k))
	}
	return out
}

func classify(s skip) skip {
	rel := strings.TrimPrefix(s.pkg, module)
	if rel == strings.TrimSuffix(module, "/") {
		rel = ""
	}
	for _, a := range allowed {
		if a.pkg.MatchString(rel) && a.test.MatchString(s.test) {
			s.allowedBy = a.why
			return s
		}
	}
	return s
}

// report prints the skips and returns how many no allowance names.
func report(out io.Writer, skips []skip) (bad int) {
	sort.SliceStable(skips, func(i, j int) bool {
		if skips[i].pkg != skips[j].pkg {
			return skips[i].pkg < skips[j].pkg
		}
		return skips[i].test < skips[j].test
	})
	for _, s := range skips {
		if s.allowedBy == "" {
			bad++
		}
	}
	fmt.Fprintf(out, "\nskipcheck: %d test(s) skipped, %d allowed by name, %d not allowed\n", len(skips), len(skips)-bad, bad)
	for _, s := range skips {
		verdict := "NOT ALLOWED"
		if s.allowedBy != "" {
			verdict = "allowed: " + s.allowedBy
		}
		fmt.Fprintf(out, "  SKIP %s %s: %s [%s]\n", strings.TrimPrefix(s.pkg, module), s.test, s.reason, verdict)
	}
	return bad
}

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
	skips, err := scan(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(2)
	}
	if bad := report(os.Stdout, skips); bad > 0 && *strict {
		fmt.Printf("skipcheck: FAIL: %d test(s) skipped under CI=true that no allowance names (.ci/skipcheck/main.go): install what they need, or make them fail\n", bad)
		os.Exit(1)
	}
}

// scan copies go test's output to out as go test without -v shows it: a
// test's own lines only when it fails (or never finishes: a panic or a
// timeout), every package line (ok, FAIL, panics) at once. It collects
// the skips. A line that is not JSON (the go command's own messages) is
// copied as it is.
func scan(in io.Reader, out io.Writer) ([]skip, error) {
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
	for _, key := range order {
		if b := held[key]; b != nil {
			fmt.Fprintf(w, "skipcheck: the output of %s, which never finished:\n%s", key, b.String())
		}
	}
	return skips, sc.Err()
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

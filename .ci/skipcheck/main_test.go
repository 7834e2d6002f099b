package main

import (
	"strings"
	"testing"
)

// A go test -json stream with one allowed and one unexplained skip: the
// output passes through, both are counted, only the second is bad.
func TestScanCountsAndClassifiesSkips(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"github.com/codesession/codesession/actors","Test":"TestCrashChild"}`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors","Test":"TestCrashChild","Output":"    killtest_test.go:62: the crash suite's child process\n"}`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors","Test":"TestCrashChild","Output":"--- SKIP: TestCrashChild (0.00s)\n"}`,
		`{"Action":"skip","Package":"github.com/codesession/codesession/actors","Test":"TestCrashChild"}`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors/diffcapture","Test":"TestX","Output":"    git_test.go:9: git is not installed\n"}`,
		`{"Action":"skip","Package":"github.com/codesession/codesession/actors/diffcapture","Test":"TestX"}`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors","Output":"ok  \tgithub.com/codesession/codesession/actors\t1.0s\n"}`,
		`{"Action":"skip","Package":"github.com/codesession/codesession/messages/empty"}`,
		`go: downloading something`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors","Test":"TestBroken","Output":"    a_test.go:3: want 1, got 2\n"}`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.00s)\n"}`,
		`{"Action":"fail","Package":"github.com/codesession/codesession/actors","Test":"TestBroken"}`,
		`{"Action":"output","Package":"github.com/codesession/codesession/actors","Test":"TestHung","Output":"    hung_test.go:7: waiting\n"}`,
	}, "\n")
	var out strings.Builder
	skips, _, err := scan(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "SKIP: TestCrashChild") {
		t.Errorf("a skipped test's lines are shown (go test without -v hides them):\n%s", out.String())
	}
	for _, want := range []string{"ok  \tgithub.com/codesession/codesession/actors\t1.0s\n", "go: downloading something\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, want := range []string{"a_test.go:3: want 1, got 2\n--- FAIL: TestBroken", "TestHung, which never finished:\n    hung_test.go:7: waiting"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(skips) != 2 {
		t.Fatalf("got %d skips, want 2: %+v", len(skips), skips)
	}
	var rep strings.Builder
	if bad := report(&rep, skips); bad != 1 {
		t.Errorf("bad = %d, want 1", bad)
	}
	if !strings.Contains(rep.String(), "2 test(s) skipped, 1 allowed by name, 1 not allowed") ||
		!strings.Contains(rep.String(), "actors/diffcapture TestX: git_test.go:9: git is not installed [NOT ALLOWED]") {
		t.Errorf("report:\n%s", rep.String())
	}
}

func TestAllowancesAreByName(t *testing.T) {
	for _, c := range []struct {
		pkg, test string
		ok        bool
	}{
		{"github.com/codesession/codesession/transports/script", "TestConformance/binary_missing", true},
		{"github.com/codesession/codesession/transports/script", "TestConformance", false}, // the whole suite skipped: not a case
		{"github.com/codesession/codesession/transports/opencode", "TestLiveEditsSessionCwd", false},
		{"github.com/codesession/codesession/actors", "TestCrashSuite/round0/faults=false", false},
		{"github.com/codesession/codesession/actors/store/filestore", "FuzzTornTail/seed#3", true},
	} {
		if got := classify(skip{pkg: c.pkg, test: c.test}).allowedBy != ""; got != c.ok {
			t.Errorf("%s %s: allowed=%v, want %v", c.pkg, c.test, got, c.ok)
		}
	}
}

// A package stopped by its timeout: the paused tests get one line, the
// running one its whole output above, and the closing summary names it
// with its panic and its last lines, after the skip report.
func TestATimedOutTestIsNamedLast(t *testing.T) {
	const pkg = "github.com/codesession/codesession/bench"
	line := func(test, action, output string) string {
		if output == "" {
			return `{"Action":"` + action + `","Package":"` + pkg + `","Test":"` + test + `"}`
		}
		return `{"Action":"output","Package":"` + pkg + `","Test":"` + test + `","Output":"` + output + `"}`
	}
	in := strings.Join([]string{
		line("TestSessions", "run", ""),
		line("TestSessions", "output", `=== RUN   TestSessions\n`),
		line("TestSessions", "output", `=== PAUSE TestSessions\n`),
		line("TestStore", "output", `=== RUN   TestStore\n`),
		line("TestStore", "output", `=== PAUSE TestStore\n`),
		line("TestStuck", "output", `=== RUN   TestStuck\n`),
		line("TestStuck", "output", `    stuck_test.go:9: waiting for the cluster\n`),
		line("TestStuck", "output", `panic: test timed out after 30m0s\n`),
		line("TestStuck", "output", `\trunning tests:\n`),
		line("TestStuck", "output", `\t\tTestStuck (30m0s)\n`),
		line("TestStuck", "output", `\n`),
		line("TestStuck", "output", `goroutine 1 [chan receive, 29 minutes]:\n`),
		line("TestStuck", "output", `testing.(*T).Run(0x1, {0x2, 0x3})\n`),
		line("TestStuck", "output", `\t/usr/local/go/src/testing/testing.go:2109 +0x4e5\n`),
		line("TestStuck", "output", `\n`),
		line("TestStuck", "output", `goroutine 7 [select, 29 minutes]:\n`),
		line("TestStuck", "output", `github.com/codesession/codesession/bench.waitNode(0x1)\n`),
		line("TestStuck", "output", `\t/work/ci/bench/cluster.go:88 +0x2a\n`),
		line("TestStuck", "output", `github.com/codesession/codesession/bench.TestStuck(0x1)\n`),
		line("TestStuck", "output", `\t/work/ci/bench/stuck_test.go:10 +0x2a\n`),
		line("TestStuck", "output", `\n`),
		line("TestStuck", "output", `goroutine 9 [semacquire, 28 minutes]:\n`),
		line("TestStuck", "output", `sync.(*WaitGroup).Wait(0x1)\n`),
		line("TestStuck", "output", `\t/usr/local/go/src/sync/waitgroup.go:118 +0x60\n`),
		line("TestStuck", "output", `github.com/codesession/codesession/actors/cluster.(*Node).Close(0x1)\n`),
		line("TestStuck", "output", `\t/work/ci/actors/cluster/node.go:416 +0x2a\n`),
		line("TestStuck", "output", `created by github.com/codesession/codesession/bench.TestStuck in goroutine 1\n`),
		line("TestStuck", "output", `\n`),
		line("TestStuck", "output", `goroutine 10 [chan send]:\n`),
		line("TestStuck", "output", `net.(*conn).Read(0x1)\n`),
		line("TestStuck", "output", `\t/usr/local/go/src/net/net.go:1 +0x60\n`),
		line("TestStuck", "output", `created by github.com/codesession/codesession/bench.TestStuck in goroutine 1\n`),
		line("TestStuck", "output", `\n`),
		line("TestStuck", "output", `goroutine 8 [select]:\n`),
		line("TestStuck", "output", `github.com/codesession/codesession/bench.waitNode(0x2)\n`),
		line("TestStuck", "output", `\t/work/ci/bench/cluster.go:88 +0x2a\n`),
		`{"Action":"output","Package":"` + pkg + `","Output":"FAIL\t` + pkg + `\t1800.2s\n"}`,
		`{"Action":"fail","Package":"` + pkg + `"}`,
	}, "\n")
	var out strings.Builder
	_, stuck, err := scan(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"bench TestStuck, which never finished:\n=== RUN   TestStuck\n    stuck_test.go:9: waiting for the cluster\npanic: test timed out",
		"bench: 2 test(s) never finished without a line of their own (paused or waiting their turn): TestSessions TestStore\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "=== PAUSE TestSessions") {
		t.Errorf("a paused test's lines are shown:\n%s", out.String())
	}
	if len(stuck) != 1 {
		t.Fatalf("got %d stopped tests, want 1: %+v", len(stuck), stuck)
	}
	var rep strings.Builder
	report(&rep, nil)
	reportHung(&rep, stuck)
	want := "skipcheck: where the goroutines in the project's code were (count, state, innermost project frame):\n" +
		"  |     2  select  bench.waitNode  cluster.go:88\n" +
		"  |     1  semacquire  actors/cluster.(*Node).Close  node.go:416\n" +
		"skipcheck: its last 2 line(s) before the panic:\n" +
		"  | === RUN   TestStuck\n  |     stuck_test.go:9: waiting for the cluster\n" +
		"skipcheck: bench TestStuck never finished: panic: test timed out after 30m0s\n"
	if !strings.HasSuffix(rep.String(), want) {
		t.Errorf("the closing summary does not end with the stopped test:\n%s", rep.String())
	}
}

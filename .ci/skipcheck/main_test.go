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
	skips, err := scan(strings.NewReader(in), &out)
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

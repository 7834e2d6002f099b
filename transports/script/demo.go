package script

import (
	_ "embed"
	"fmt"
)

//go:embed testdata/demo.json
var demoJSON []byte

// DemoScenario returns the demo scenario (testdata/demo.json), a fresh copy
// on every call. Turn 1 (any input without "test") thinks, writes
// greet/greet.go and README.md, asks permission for a Bash "go vet ./...",
// then reports; turn 2 (an input containing "test") writes
// greet/greet_test.go, asks permission for a Bash "go test ./..." and
// reports. Both cost a few scripted cents.
func DemoScenario() *Scenario {
	sc, err := ParseScenario(demoJSON)
	if err != nil {
		// The embedded file is checked by TestDemoScenario; reaching this is
		// a build defect, not an input error.
		panic(fmt.Sprintf("script: embedded demo scenario is invalid: %v", err))
	}
	return sc
}

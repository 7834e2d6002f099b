package actors_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// The embedded runtime, as the README quotes it: one session of the
// scripted backend (no model, no credentials) that adds a file, read turn
// by turn, answered, and stopped with an inferred verdict. The runtime logs
// nothing unless given a logger: actors.WithLogger(slog.Default()) routes
// its log lines through the process's default logger.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "codesession-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	repo, home := filepath.Join(dir, "repo"), filepath.Join(dir, "home")
	if err := os.Mkdir(repo, 0o755); err != nil {
		log.Fatal(err)
	}
	// the script backend replays this scenario: one turn that writes a file
	scenario := filepath.Join(dir, "scenario.json")
	if err := os.WriteFile(scenario, []byte(`{"turns": [{"steps": [
		{"write": {"path": "greet_test.go", "content": "package greet\n"}},
		{"text": "added greet_test.go"}]}]}`), 0o644); err != nil {
		log.Fatal(err)
	}

	cfg := config.Default()
	cfg.Home = home               // sessions and learning data (default ~/.codesession)
	cfg.DefaultBackend = "script" // the scripted backend: no model, no credentials
	cfg.Env = map[string]string{"CODESESSION_SCRIPT": scenario}
	rt, err := actors.New(cfg) // add actors.WithLogger(slog.Default()) to see its logs
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	const scope = "my-agent" // the owner scope: every op names who is asking
	st, err := rt.Start(ctx, scope, messages.Start{Brief: "Add a test for Greet", Cwd: repo})
	if err != nil {
		log.Fatal(err)
	}
	for {
		r, err := rt.ReadTurn(ctx, scope, messages.ReadTurn{SessionID: st.SessionID})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Kind, r.Text)
		if r.Kind != messages.KindClarification {
			break // turn_complete, ended, error or max_rounds
		}
		_, err = rt.Answer(ctx, scope, messages.Answer{SessionID: st.SessionID,
			ClarificationID: r.ClarificationID, Decision: messages.DecisionAllowOnce})
		if err != nil {
			log.Fatal(err)
		}
	}
	stop, err := rt.Stop(ctx, scope, messages.Stop{SessionID: st.SessionID}) // no verdict: inferred
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verdict:", stop.Outcome)
	// Output:
	// turn_complete added greet_test.go
	// verdict: success
}

package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestTwentyClaudeSessionsThroughTheDaemonBesideACPUHog is claudecode's
// TestTwentyConcurrentStartsBesideACPUHog through the daemon: twenty HTTP
// clients each start a session and read its turn at once, every core busy,
// and the daemon keeps its log in the file store, as `serve` does. A read
// whose long poll runs out reads again: the only deadline stops a hang.
func TestTwentyClaudeSessionsThroughTheDaemonBesideACPUHog(t *testing.T) {
	if testing.Short() {
		t.Skip("twenty real CLIs: not in -short")
	}
	bin := claudeBinary(t)
	mock, err := modelmock.Start(t, nil)
	require.NoError(t, err)
	f := newFixture(t, func(o *DaemonOptions) {
		o.Store = nil // the file store under the config's home, as `serve` runs
		o.Backends = transports.NewRegistry(claudecode.New(claudecode.WithBinary(bin)))
		o.Config.DefaultBackend = claudecode.ID
		// the runtime bounds a backend's start by a multiple of this; far
		// above what a loaded machine needs (it only stops a hang)
		o.Config.Supervision.ShutdownTimeout = config.Duration(2 * time.Minute)
		o.Config.Env = map[string]string{"ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-ant-test", "HOME": t.TempDir()}
	})

	subprocesstest.BusyEveryCore(t)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // only stops a hang
	defer cancel()
	const n = 20
	cwds := make([]string, n)
	for i := range cwds {
		cwds[i] = t.TempDir()
	}
	results := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = f.startAndReadOneTurn(ctx, cwds[i])
		}()
	}
	wg.Wait()
	for i, err := range results {
		assert.NoError(t, err, "client %d", i)
	}
}

// startAndReadOneTurn is one client of the daemon: start a claude-code
// session, read its first turn, which must be a turn_complete, and stop it.
// It reports what went wrong as an error (it runs off the test goroutine).
func (f *fixture) startAndReadOneTurn(ctx context.Context, cwd string) error {
	var st messages.StartResult
	if err := f.post(ctx, "/api/code-sessions", map[string]any{"brief": "say pong", "cwd": cwd, "backend": claudecode.ID}, &st); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	var r messages.TurnResult
	for {
		err := f.post(ctx, "/api/code-sessions/"+st.SessionID+"/read-turn", map[string]any{"timeoutMs": MaxReadTurnWait.Milliseconds()}, &r)
		if messages.IsCode(err, messages.CodeTimeout) && ctx.Err() == nil {
			continue // the long poll ran out before the turn did: read again
		}
		if err != nil {
			return fmt.Errorf("read-turn of %s: %w", st.SessionID, err)
		}
		break
	}
	if r.Kind != messages.KindTurnComplete {
		return fmt.Errorf("session %s read %s: %s%s", st.SessionID, r.Kind, r.Text, r.Message)
	}
	if err := f.post(ctx, "/api/code-sessions/"+st.SessionID+"/stop", map[string]any{"outcome": messages.OutcomeSuccess}, nil); err != nil {
		return fmt.Errorf("stop of %s: %w", st.SessionID, err)
	}
	return nil
}

// post is call for a goroutine other than the test's: the envelope's
// error comes back as a *messages.Error, everything else as an error.
func (f *fixture) post(ctx context.Context, path string, body any, dst any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var out resp
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Errorf("%d, not an envelope: %s", res.StatusCode, data)
	}
	if !out.OK {
		if out.Error != nil {
			return out.Error
		}
		return fmt.Errorf("%d with no error: %s", res.StatusCode, data)
	}
	if dst == nil {
		return nil
	}
	return json.Unmarshal(out.Data, dst)
}

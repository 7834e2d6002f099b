package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/controlplane"
	"github.com/codesession/codesession/actors/controlplane/client"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/script"
)

const token = "client-test-token-0123456789"

func daemon(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.DefaultBackend = script.ID
	cfg.Supervision.ShutdownTimeout = config.Duration(2 * time.Second)
	sc := &script.Scenario{
		Turns: []script.Turn{{Match: "ASK", Steps: []script.Step{script.Text("checking"),
			script.Tool("Bash", map[string]any{"command": "go vet ./..."}, "").Asking(), script.Text("vetted")}}},
		Fallback: &script.Turn{Steps: []script.Step{script.Text("reply to turn {{turn}}: {{input}}")}},
	}
	d, err := controlplane.NewDaemon(controlplane.DaemonOptions{Config: cfg, Token: token, Store: store.NewMemory(),
		Backends: transports.NewRegistry(script.New(script.WithScenario(sc))), Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Shutdown(ctx)
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// TestClientDrivesASession drives one session through every op with the
// client against a real control plane, and checks the daemon's errors
// arrive typed.
func TestClientDrivesASession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(daemon(t), token)
	require.NoError(t, err)

	bs, err := c.Backends(ctx)
	require.NoError(t, err)
	require.Len(t, bs.Backends, 1)
	assert.Equal(t, script.ID, bs.Backends[0].Descriptor.ID)

	st, err := c.Start(ctx, messages.Start{Brief: "ASK first", Cwd: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, messages.PostureAcceptEdits, st.MaxPosture, "the default token's ceiling")

	q, err := c.ReadTurn(ctx, st.SessionID, client.ReadOptions{Wait: time.Minute}) // only stops a hang
	require.NoError(t, err)
	require.Equal(t, messages.KindClarification, q.Kind)
	again, err := c.ReadTurn(ctx, st.SessionID[:10], client.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, q.ClarificationID, again.ClarificationID, "a prefix, and the pending question again")

	_, err = c.Answer(ctx, messages.Answer{SessionID: st.SessionID, ClarificationID: q.ClarificationID, Decision: messages.DecisionAllowOnce})
	require.NoError(t, err)
	done, err := c.ReadTurn(ctx, st.SessionID, client.ReadOptions{IncludeDiff: true})
	require.NoError(t, err)
	assert.Equal(t, messages.KindTurnComplete, done.Kind)

	_, err = c.Guide(ctx, messages.Guide{SessionID: st.SessionID, Text: "more", Mode: messages.GuideQueue})
	require.NoError(t, err)
	next, err := c.ReadTurn(ctx, st.SessionID, client.ReadOptions{})
	require.NoError(t, err)
	assert.Contains(t, next.Text, "more")

	_, err = c.SetPosture(ctx, st.SessionID, messages.PosturePlan)
	require.NoError(t, err)
	_, err = c.SetPosture(ctx, st.SessionID, messages.PostureFull)
	var me *messages.Error
	require.True(t, errors.As(err, &me), "%v", err)
	assert.Equal(t, messages.CodeCeilingExceeded, me.Code)

	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	s, err := c.Session(ctx, st.SessionID, 0, 2)
	require.NoError(t, err)
	assert.Len(t, s.Events, 2)
	assert.Greater(t, s.LastSeq, uint64(2))

	stop, err := c.Stop(ctx, messages.Stop{SessionID: st.SessionID, Outcome: messages.OutcomeSuccess})
	require.NoError(t, err)
	assert.Equal(t, messages.OutcomeSuccess, stop.Outcome)
	_, err = c.Interrupt(ctx, st.SessionID)
	assert.True(t, messages.IsCode(err, messages.CodeNotLive), "%v", err)
	res, err := c.Resume(ctx, st.SessionID, "go on")
	require.NoError(t, err)
	assert.Equal(t, st.SessionID, res.SessionID)

	sc, err := c.Scope(ctx)
	require.NoError(t, err)
	assert.Equal(t, controlplane.DefaultScope, sc.Scope)
	sc, err = c.SetScope(ctx, client.ScopeConstraints{MaxPosture: messages.PosturePlan})
	require.NoError(t, err)
	assert.Equal(t, messages.PosturePlan, sc.Constraints.MaxPosture)

	_, err = client.New("ftp://x", token)
	assert.True(t, messages.IsCode(err, messages.CodeInvalid))
	bad, err := client.New(daemon(t), "wrong-token")
	require.NoError(t, err)
	_, err = bad.Sessions(ctx)
	assert.True(t, messages.IsCode(err, messages.CodeUnauthorized), "%v", err)
	gone, err := client.New("127.0.0.1:1", token)
	require.NoError(t, err)
	_, err = gone.Sessions(ctx)
	assert.True(t, client.IsUnreachable(err), "%v", err)
}

package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/diffcapture"
	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// scope is the owner scope every benchmark session belongs to.
const scope = "bench"

// opTimeout bounds one op. It is far beyond any op's cost on a loaded
// machine: reaching it means an answer was lost (a correctness failure),
// not that the machine was slow.
const opTimeout = 10 * time.Minute

// benchRuntime is a runtime over a counting store in its own home.
type benchRuntime struct {
	rt    *actors.Runtime
	home  string
	store *countingStore
	o     Options
}

// openRuntime starts a runtime in home with the given backends (the first
// one is the default) and backend environment, no diff capture (it has its
// own hook) and no round limit; extra options come last.
func openRuntime(o Options, home string, backends *transports.Registry, env map[string]string, extra ...actors.Option) (*benchRuntime, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.Home = home
	cfg.DefaultBackend = backends.IDs()[0]
	cfg.DefaultMaxRounds = 0
	cfg.LogLevel = "warn"
	cfg.Env = env
	st, err := o.Store(home)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cs := &countingStore{Store: st}
	var given store.Store = cs
	if _, ok := st.(store.Pipeliner); ok {
		given = pipelinedCountingStore{cs} // sessions pipeline their appends through the counts
	}
	opts := append([]actors.Option{actors.WithStore(given), actors.WithBackends(backends),
		actors.WithDiffCapture(diffcapture.NoopFactory), actors.WithLogger(o.Logger),
		actors.WithoutLearning()}, extra...) // the runtime alone: no outcome reads or appends in the counts
	rt, err := actors.New(cfg, opts...)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &benchRuntime{rt: rt, home: home, store: cs, o: o}, nil
}

// close closes the runtime (and its store).
func (b *benchRuntime) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return b.rt.Close(ctx)
}

// verify reads the logs of sids back through a store opened afresh on the
// runtime's home (call close first) and adds the log checks to res.
func (b *benchRuntime) verify(ctx context.Context, sids []string, want logExpect, res *Result) (logStats, error) {
	st, err := b.o.Store(b.home)
	if err != nil {
		return logStats{}, fmt.Errorf("reopen store: %w", err)
	}
	defer st.Close()
	return checkLogs(ctx, st, sids, want, res), nil
}

// opCtx is the context of one op.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}

// expectKind checks a read-turn result's kind.
func expectKind(r messages.TurnResult, want messages.TurnKind) error {
	if r.Kind != want {
		return fmt.Errorf("read-turn returned %s (turn %d: %s%s), want %s", r.Kind, r.Turn, r.Message, r.Text, want)
	}
	return nil
}

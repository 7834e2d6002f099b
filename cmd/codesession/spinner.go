package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// spinner shows, on a terminal, that a command is waiting and on what: a
// frame, the session's state (status, fetched every refresh) and the time
// waited, redrawn in place on one line. stop clears the line, so the result
// printed next starts clean. Scripts never see it: it runs only when stderr
// is a terminal, and not with --quiet or --json.
type spinner struct {
	w       io.Writer
	status  func(ctx context.Context) string // the state to show; "" keeps the last
	frame   time.Duration                    // between redraws
	refresh time.Duration                    // between status fetches

	cancel context.CancelFunc
	done   chan struct{}
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// start draws until stop is called.
func (sp *spinner) start(ctx context.Context) {
	ctx, sp.cancel = context.WithCancel(ctx)
	sp.done = make(chan struct{})
	go sp.run(ctx)
}

func (sp *spinner) run(ctx context.Context) {
	defer close(sp.done)
	began := time.Now()
	var mu sync.Mutex
	state := "waiting"
	fetch := func(ctx context.Context) {
		if s := sp.status(ctx); s != "" {
			mu.Lock()
			state = s
			mu.Unlock()
		}
	}
	// the first fetch outlives a stop that comes while it runs (a result
	// that is already there), so the line drawn names the session rather
	// than a bare "waiting"; bounded, so a daemon that hangs delays stop
	// by at most that
	first, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	fetch(first)
	cancel()
	frames := time.NewTicker(sp.frame)
	defer frames.Stop()
	refresh := time.NewTicker(sp.refresh)
	defer refresh.Stop()
	for i := 0; ; i++ {
		mu.Lock()
		line := fmt.Sprintf("%s %s (%s)", spinnerFrames[i%len(spinnerFrames)], state, time.Since(began).Truncate(time.Second))
		mu.Unlock()
		fmt.Fprintf(sp.w, "\r\x1b[K%s", line)
		select {
		case <-ctx.Done():
			fmt.Fprint(sp.w, "\r\x1b[K")
			return
		case <-refresh.C:
			fetch(ctx)
		case <-frames.C:
		}
	}
}

// stop clears the line and returns once nothing more is drawn.
func (sp *spinner) stop() {
	if sp == nil || sp.cancel == nil {
		return
	}
	sp.cancel()
	<-sp.done
}

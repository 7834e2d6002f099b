package cli

import (
	"context"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// Base is what a kit transport embeds: its Config (Cfg) and the methods
// every such transport has the same way.
type Base struct {
	Cfg        Config
	descriptor func() messages.Descriptor
}

// WarmSizer is the warm pool a transport sizes at New (a *warmpool.Slot).
type WarmSizer interface{ SetWarmPool(n int) }

// NewBase returns the base of a transport with cfg as its defaults and
// descriptor as its capability descriptor, then applies opts (a warm pool
// size goes to pool).
func NewBase(cfg Config, descriptor func() messages.Descriptor, pool WarmSizer, opts []Option) Base {
	b := Base{Cfg: cfg, descriptor: descriptor}
	if n, ok := b.Cfg.Apply(opts); ok {
		pool.SetWarmPool(n)
	}
	return b
}

// Descriptor returns the capability descriptor.
func (b *Base) Descriptor() transports.Descriptor { return b.descriptor() }

// Binary returns the executable the transport would run with the given
// extra environment (the CLI's EnvVar there wins over the process's own),
// or an error saying why there is none.
func (b *Base) Binary(env []string) (string, error) { return b.Cfg.Find(env) }

// Probe runs the CLI's version probe with a session's environment,
// bounded by ctx and the probe's timeout.
func (b *Base) Probe(ctx context.Context) messages.Availability { return b.Cfg.Availability(ctx) }

// CheckEnv refuses a start when founder credentials are in the daemon's
// environment and not named for this backend (proc.EnvPolicy.Check).
func (b *Base) CheckEnv(spec transports.SessionSpec) error { return b.Cfg.CheckEnv(spec) }

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
)

// The raw baselines: what the runtime builds on, with nothing of ours
// around it. Hollywood actors spawned and asked the way the runtime does
// (a small inbox, a reply channel), and plain files written the way the
// file store writes them (one write and one fsync per batch; temp file,
// fsync, rename, fsync of the directory for a record).

// rawPing asks a raw actor for an answer on a channel, the way
// actors.Runtime asks its registry and sessions.
type rawPing struct{ reply chan struct{} }

// rawForward is rawPing sent through a second actor first (the registry's
// hop).
type rawForward struct {
	to   *actor.PID
	ping rawPing
}

// rawActor answers rawPing on its channel and hollywood requests with
// Respond. With children > 0 it spawns that many children when started,
// like a session actor spawns persist, diff capture and transport.
type rawActor struct{ children int }

func (a *rawActor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		for i := range a.children {
			c.SpawnChild(func() actor.Receiver { return &rawActor{} }, fmt.Sprintf("child%d", i),
				actor.WithInboxSize(supervise.DefaultInboxSize))
		}
	case rawPing:
		m.reply <- struct{}{}
	case rawForward:
		c.Send(m.to, m.ping)
	case string:
		c.Respond(m)
	}
}

// newRawEngine starts a bare hollywood engine.
func newRawEngine() (*actor.Engine, error) {
	return actor.NewEngine(actor.NewEngineConfig())
}

// spawnRaw spawns a raw actor (with children) with the runtime's inbox size.
func spawnRaw(e *actor.Engine, id string, children int) *actor.PID {
	return e.Spawn(func() actor.Receiver { return &rawActor{children: children} }, "raw",
		actor.WithID(id), actor.WithInboxSize(supervise.DefaultInboxSize))
}

// pingRaw is one request round trip through channels.
func pingRaw(e *actor.Engine, pid *actor.PID) {
	ch := make(chan struct{}, 1)
	e.Send(pid, rawPing{reply: ch})
	<-ch
}

// rawRecord is the bytes of a typical meta.json, encoded as the file store
// encodes it.
func rawRecord() []byte {
	now := time.Now().UTC()
	rec := messages.SessionRecord{SessionID: messages.NewSessionID(), BackendID: "script", Cwd: "/tmp/codesession-bench/work",
		MaxPosture: messages.PostureAcceptEdits, Posture: messages.PostureDefault, TaskBrief: "bench session: scripted turns with clarifications and guidance",
		Status: messages.StatusRunning, CreatedAt: now, UpdatedAt: now, Version: messages.RecordVersion,
		Runs: []messages.Run{{StartedAt: now, ExternalSessionID: "script-0123456789abcdef", OwnerScopeID: "bench", Runtime: "rt-bench"}}}
	b, _ := json.MarshalIndent(rec, "", "  ")
	return append(b, '\n')
}

// encodeLines encodes events as events.jsonl lines, as the file store does.
func encodeLines(evs []messages.PersistedEvent) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, ev := range evs {
		_ = enc.Encode(ev)
	}
	return buf.Bytes()
}

// syncDir fsyncs a directory.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// rawCreate makes dir and writes data as its meta.json the way the file
// store creates a record: mkdir, fsync the parent, then rawReplace.
func rawCreate(dir string, data []byte) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	return rawReplace(dir, data)
}

// rawReplace atomically replaces dir/meta.json: temp file, write, fsync,
// close, rename, fsync the directory.
func rawReplace(dir string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "meta.json.tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, "meta.json")); err != nil {
		return err
	}
	return syncDir(dir)
}

// rawLog is a plain append-only file written with one write and one fsync
// per batch; the first write also fsyncs the directory (the file is new),
// as the file store does.
type rawLog struct {
	f       *os.File
	dir     string
	written bool
}

func openRawLog(dir string) (*rawLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &rawLog{f: f, dir: dir}, nil
}

func (l *rawLog) append(data []byte) error {
	if _, err := l.f.Write(data); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	if !l.written {
		l.written = true
		return syncDir(l.dir)
	}
	return nil
}

func (l *rawLog) close() error { return l.f.Close() }

// countLines counts the lines of a file.
func countLines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return bytes.Count(b, []byte{'\n'}), nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// diffCmd prints what a turn changed, from the session's persisted
// turn_diff events: the last turn's by default, or TURN's.
type diffCmd struct {
	client clientFlags
	sid    string
	turn   int // 0: the last turn with a diff
	stat   bool
	color  string
	json   bool
}

func (c *diffCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("diff")
	fs.BoolVar(&c.stat, "stat", false, "only the changed files with their counts")
	fs.StringVar(&c.color, "color", "auto", "colour the diff: auto (when stdout is a terminal and NO_COLOR is unset), always or never")
	fs.BoolVar(&c.json, "json", false, "print the turn's messages.TurnDiff as one JSON object")
	c.client.add(fs)
	return fs
}

func diffCommand() command {
	return command{
		name:    "diff",
		summary: "show what a turn changed: the last turn's diff, or TURN's",
		usage:   "diff [flags] SESSION [TURN]",
		flags:   func() *pflag.FlagSet { return (&diffCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseDiffFlags(args) },
	}
}

func parseDiffFlags(args []string) (*diffCmd, error) {
	const cmd = "diff"
	c := &diffCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 1, 2:
	default:
		return nil, usagef(cmd, "want SESSION and at most a TURN, got %d arguments", fs.NArg())
	}
	var err error
	if c.sid, err = sessionArg(cmd, fs.Arg(0)); err != nil {
		return nil, err
	}
	if fs.NArg() == 2 {
		if c.turn, err = strconv.Atoi(fs.Arg(1)); err != nil || c.turn < 1 {
			return nil, usagef(cmd, "TURN must be a turn number (1 or more), got %q", fs.Arg(1))
		}
	}
	switch c.color {
	case "auto", "always", "never":
	default:
		return nil, usagef(cmd, "--color takes auto, always or never, got %q", c.color)
	}
	return c, nil
}

func (c *diffCmd) exec(ctx context.Context, s *streams) error {
	const cmd = "diff"
	dc, err := c.client.client(cmd, s.getenv)
	if err != nil {
		return err
	}
	var found *messages.PersistedEvent
	var turns []int
	for after := uint64(0); ; {
		d, err := getSession(ctx, dc, c.sid, after, 1000)
		if err != nil {
			return remoteErr(cmd, "get", err)
		}
		for i, ev := range d.Events {
			after = ev.Seq
			if ev.Event.Type != messages.EvTurnDiff || ev.Event.Diff == nil {
				continue
			}
			turns = append(turns, ev.Turn)
			if c.turn == 0 || ev.Turn == c.turn {
				found = &d.Events[i]
			}
		}
		if len(d.Events) == 0 || after >= d.LastSeq {
			break
		}
	}
	if found == nil {
		if c.turn == 0 {
			return &messages.Error{Code: messages.CodeNotFound, Op: cmd, Message: "the session has no turn with a diff yet"}
		}
		return &messages.Error{Code: messages.CodeNotFound, Op: cmd,
			Message: fmt.Sprintf("turn %d has no diff; turns with one: %s", c.turn, joinInts(turns))}
	}
	d := found.Event.Diff
	if c.json {
		return writeJSON(s.stdout, d)
	}
	p := &textPrinter{w: s.stdout}
	p.printf("turn %d: ", found.Turn)
	p.diffFiles(d)
	if !c.stat {
		writeUnified(s.stdout, d.UnifiedDiff, useColor(c.color, s.stdout, s.getenv))
	}
	return nil
}

func joinInts(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// useColor decides --color: always, never, or auto (a terminal, and no
// NO_COLOR, as no-color.org asks).
func useColor(mode string, w io.Writer, getenv func(string) string) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if getenv("NO_COLOR") != "" {
		return false
	}
	return isTerminal(w)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// writeUnified prints a unified diff, coloured as git colours it.
func writeUnified(w io.Writer, diff string, color bool) {
	if diff == "" {
		return
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(diff, "\n"), "\n") {
		code := ""
		switch {
		case !color:
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"), strings.HasPrefix(line, "diff "), strings.HasPrefix(line, "index "):
			code = "\x1b[1m"
		case strings.HasPrefix(line, "@@"):
			code = "\x1b[36m"
		case strings.HasPrefix(line, "+"):
			code = "\x1b[32m"
		case strings.HasPrefix(line, "-"):
			code = "\x1b[31m"
		}
		if code != "" {
			fmt.Fprintf(w, "%s%s\x1b[0m\n", code, line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
}

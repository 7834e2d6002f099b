package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// The ACP reader sits between the agent's stdout and the SDK's connection:
// it passes on each line that is a JSON-RPC 2.0 object and reports every
// other line (a wrapper's banner, a half-written line, a line over the cap)
// instead of letting the SDK log and drop it, or end the connection on a
// line longer than its scanner's buffer. One bad line never stops the
// stream.

// lineVerdict says what the reader made of one line.
type lineVerdict int

const (
	lineInvalid lineVerdict = iota
	// linePass: a JSON-RPC object, passed on to the SDK.
	linePass
	// lineBlank: an empty line, skipped without a report.
	lineBlank
	// lineGarbage: not a JSON-RPC 2.0 object; reported.
	lineGarbage
	// lineTooLong: over the line cap; dropped unread and reported.
	lineTooLong
	// lineIgnored: a JSON-RPC object the client has no use for, dropped
	// before the SDK decodes it, without a report (see ignoredUpdates).
	lineIgnored
)

// ignoredUpdates are the session/update kinds the client ignores and the
// reader drops unread by the SDK: qwen 0.24 sends its slash-command list,
// every bundled skill's SKILL.md included, as one ~560 kB
// available_commands_update at each session start, which the SDK would
// decode into maps only for the client to discard it (and under -race it
// was still decoding when a session closed).
var ignoredUpdates = map[string]bool{"available_commands_update": true}

func (v lineVerdict) String() string {
	switch v {
	case linePass:
		return "pass"
	case lineBlank:
		return "blank"
	case lineGarbage:
		return "garbage"
	case lineTooLong:
		return "too-long"
	case lineIgnored:
		return "ignored"
	}
	return "invalid"
}

// classify decides one line (without its newline) of at most the cap.
func classify(line []byte) lineVerdict {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return lineBlank
	}
	if line[0] != '{' || !json.Valid(line) {
		return lineGarbage
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &env) != nil || env.JSONRPC != "2.0" {
		return lineGarbage
	}
	if env.Method == "session/update" {
		var p struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
			} `json:"update"`
		}
		if json.Unmarshal(env.Params, &p) == nil && ignoredUpdates[p.Update.SessionUpdate] {
			return lineIgnored
		}
	}
	return linePass
}

// filterLine passes one line of the agent's stdout (as the kit's line
// reader gives it: without its newline, or the head of a line of over
// bytes over the cap) to w when it is a JSON-RPC object, and reports it
// otherwise (a blank line is skipped). Only w's error is returned.
func filterLine(line []byte, over int, w io.Writer, report func(v lineVerdict, n int, head []byte)) error {
	if over > 0 {
		report(lineTooLong, over, line[:min(len(line), 80)])
		return nil
	}
	line = bytes.TrimRight(line, "\r")
	switch v := classify(line); v {
	case linePass:
		_, err := w.Write(append(line[:len(line):len(line)], '\n'))
		return err
	case lineBlank, lineIgnored:
	default:
		report(v, len(line), line[:min(len(line), 80)])
	}
	return nil
}

// describeDropped is the EvError text for a dropped line.
func describeDropped(v lineVerdict, n int, head []byte) string {
	switch v {
	case lineTooLong:
		return fmt.Sprintf("the agent wrote a %d-byte line, over the line cap; it was dropped (it began %q)", n, head)
	default:
		return fmt.Sprintf("the agent wrote a line that is not ACP JSON-RPC; it was dropped: %q", head)
	}
}

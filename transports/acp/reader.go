package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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
)

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
		JSONRPC string `json:"jsonrpc"`
	}
	if json.Unmarshal(line, &env) != nil || env.JSONRPC != "2.0" {
		return lineGarbage
	}
	return linePass
}

// filterLines copies the JSON-RPC lines of r to w, one per line, calling
// report for every line it drops (with its verdict, its length and its
// start). It returns when r ends or w fails; it never closes w.
func filterLines(r io.Reader, w io.Writer, maxLine int, report func(v lineVerdict, n int, head []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		buf = buf[:0]
		n, over := 0, false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			n += len(chunk)
			if !over {
				buf = append(buf, chunk...)
				if len(buf) > maxLine+1 { // +1: the newline does not count
					over = true
					buf = append([]byte(nil), buf[:80]...) // keep the start for the report only
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			break
		}
		if n > 0 {
			line := bytes.TrimRight(buf, "\r\n")
			switch {
			case over:
				report(lineTooLong, n, line)
			default:
				switch v := classify(line); v {
				case linePass:
					out := append(line, '\n')
					if _, werr := w.Write(out); werr != nil {
						return werr
					}
				case lineBlank:
				default:
					report(v, len(line), line[:min(len(line), 80)])
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
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

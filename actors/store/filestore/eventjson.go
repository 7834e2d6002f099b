package filestore

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// appendEventLine appends ev as encoding/json's Encoder (SetEscapeHTML
// false) writes it, newline included, without reflection: the encoding of
// every event on the persist path was a fifth of the store's CPU per
// append. ok is false, with b unchanged, for an event it leaves to
// encoding/json: one with a containment record (a session's start), a
// float or time encoding/json refuses, or an input that is not valid JSON.
// A turn's usage and diff are encoded here too: left to encoding/json they
// were two events a turn through reflection and a new Encoder (0.1 s of
// a 10,000-session turns phase). The output is byte for byte encoding/json's
// (eventjson_test.go compares the two on every field, fuzzed events and
// real sessions'), so a log never depends on which encoder wrote a line.
func appendEventLine(b []byte, ev *messages.PersistedEvent) (_ []byte, ok bool) {
	e := &ev.Event
	if e.Containment != nil {
		return b, false
	}
	orig := b
	fail := func() ([]byte, bool) { return orig, false }
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, `,"at":"`...)
	var err error
	if b, err = ev.At.AppendText(b); err != nil {
		return fail()
	}
	b = append(b, `","turn":`...)
	b = strconv.AppendInt(b, int64(ev.Turn), 10)
	b = append(b, `,"event":{"type":`...)
	b = appendJSONString(b, string(e.Type))
	b = optString(b, `,"text":`, e.Text)
	b = optBool(b, `,"delta":true`, e.Delta)
	b = optString(b, `,"toolUseId":`, e.ToolUseID)
	b = optString(b, `,"toolName":`, e.ToolName)
	if len(e.Input) > 0 {
		b = append(b, `,"input":`...)
		buf := bytes.NewBuffer(b)
		if json.Compact(buf, e.Input) != nil {
			return fail()
		}
		b = buf.Bytes()
	}
	b = optString(b, `,"output":`, e.Output)
	b = optBool(b, `,"isError":true`, e.IsError)
	b = optBool(b, `,"truncated":true`, e.Truncated)
	b = optInt(b, `,"originalBytes":`, e.OriginalBytes)
	b = optString(b, `,"state":`, string(e.State))
	b = optInt(b, `,"numTurns":`, e.NumTurns)
	if b, ok = optFloat(b, `,"costUsd":`, e.CostUSD); !ok {
		return fail()
	}
	if b, ok = optFloat(b, `,"totalCostUsd":`, e.TotalCostUSD); !ok {
		return fail()
	}
	if e.Usage != nil {
		b = appendUsageJSON(append(b, `,"usage":`...), e.Usage)
	}
	b = optBool(b, `,"fatal":true`, e.Fatal)
	b = optString(b, `,"externalSessionId":`, e.ExternalSessionID)
	b = optString(b, `,"model":`, e.Model)
	b = optString(b, `,"source":`, string(e.Source))
	b = optString(b, `,"mode":`, string(e.Mode))
	b = optString(b, `,"posture":`, string(e.Posture))
	b = optString(b, `,"clarificationId":`, e.ClarificationID)
	b = optString(b, `,"decision":`, string(e.Decision))
	b = optString(b, `,"reason":`, e.Reason)
	b = optString(b, `,"child":`, e.Child)
	if e.Diff != nil {
		b = appendDiffJSON(append(b, `,"diff":`...), e.Diff)
	}
	b = optString(b, `,"releaseReason":`, string(e.ReleaseReason))
	b = optString(b, `,"outcome":`, string(e.Outcome))
	b = optString(b, `,"note":`, e.Note)
	return append(b, "}}\n"...), true
}

// appendUsageJSON is encoding/json's encoding of u: each count omitted
// when zero, {} when all are.
func appendUsageJSON(b []byte, u *messages.Usage) []byte {
	b = append(b, '{')
	at := len(b)
	b = optInt64(b, `,"inputTokens":`, u.InputTokens)
	b = optInt64(b, `,"outputTokens":`, u.OutputTokens)
	b = optInt64(b, `,"cacheReadTokens":`, u.CacheReadTokens)
	b = optInt64(b, `,"cacheWriteTokens":`, u.CacheWriteTokens)
	if len(b) > at {
		// the first field's comma goes
		b = append(b[:at], b[at+1:]...)
	}
	return append(b, '}')
}

// appendDiffJSON is encoding/json's encoding of d (HTML escaping off):
// files null when nil, the omitempty fields omitted when zero.
func appendDiffJSON(b []byte, d *messages.TurnDiff) []byte {
	b = append(b, `{"source":`...)
	b = appendJSONString(b, string(d.Source))
	b = append(b, `,"files":`...)
	if d.Files == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range d.Files {
			f := &d.Files[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = appendJSONString(b, f.Path)
			b = optString(b, `,"oldPath":`, f.OldPath)
			b = append(b, `,"status":`...)
			b = appendJSONString(b, f.Status)
			b = optInt(b, `,"insertions":`, f.Insertions)
			b = optInt(b, `,"deletions":`, f.Deletions)
			b = optBool(b, `,"binary":true`, f.Binary)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = optInt(b, `,"filesOmitted":`, d.FilesOmitted)
	b = append(b, `,"summary":`...)
	b = appendJSONString(b, d.Summary)
	b = optString(b, `,"unifiedDiff":`, d.UnifiedDiff)
	b = optBool(b, `,"truncated":true`, d.Truncated)
	b = optString(b, `,"warning":`, d.Warning)
	return append(b, '}')
}

func optInt64(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

func optString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

func optBool(b []byte, keyTrue string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, keyTrue...)
}

func optInt(b []byte, key string, v int) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(v), 10)
}

// optFloat is encoding/json's float64 encoding (ES6 number formatting);
// false for NaN and infinities, which it refuses.
func optFloat(b []byte, key string, f float64) ([]byte, bool) {
	if f == 0 {
		return b, true
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	b = append(b, key...)
	abs := math.Abs(f)
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoding with HTML escaping
// off (an Encoder with SetEscapeHTML(false)): quotes, backslashes and
// control bytes escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped.
func appendJSONString(b []byte, s string) []byte { return appendJSONStringSafe(b, s, &jsonSafe) }

// appendJSONStringHTML is json.Marshal's string encoding: appendJSONString
// with <, > and & escaped too.
func appendJSONStringHTML(b []byte, s string) []byte {
	return appendJSONStringSafe(b, s, &jsonHTMLSafe)
}

// jsonSafe and jsonHTMLSafe say which ASCII bytes a JSON string holds as
// they are (encoding/json's safeSet and htmlSafeSet).
var jsonSafe, jsonHTMLSafe = func() (safe, html [utf8.RuneSelf]bool) {
	for c := range utf8.RuneSelf {
		safe[c] = c >= 0x20 && c != '"' && c != '\\'
		html[c] = safe[c] && c != '<' && c != '>' && c != '&'
	}
	return
}()

func appendJSONStringSafe(b []byte, s string, safe *[utf8.RuneSelf]bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

package transports

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/codesession/codesession/messages"
)

// TailText is the end of a process's output for an error message: at most
// n bytes of b (a line cut at the start is dropped), its non-empty lines
// trimmed and joined by " | ".
func TailText(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	var keep []string
	for l := range strings.SplitSeq(strings.ReplaceAll(string(b), "\r", ""), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, " | ")
}

// RandomHex is n random bytes in lower-case hex, for nonces and ids.
func RandomHex(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewUUID returns a random (version 4) UUID: the session id droid and grok
// are pinned to.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// CheckSpec is the check every backend's Open makes first: a sink, and a
// posture and an effort that exist. It returns spec with the posture
// defaulted (PostureDefault when unset); errors are invalid-field errors
// of OpStart.
func CheckSpec(spec SessionSpec, sink Sink) (SessionSpec, error) {
	if sink == nil {
		return spec, messages.FieldError(messages.OpStart, "sink", "required")
	}
	if spec.Posture == "" {
		spec.Posture = messages.PostureDefault
	}
	if !spec.Posture.Valid() {
		return spec, messages.FieldError(messages.OpStart, "posture", "unknown posture %q", spec.Posture)
	}
	if spec.Effort != "" && !spec.Effort.Valid() {
		return spec, messages.FieldError(messages.OpStart, "effort", "unknown effort %q", spec.Effort)
	}
	return spec, nil
}

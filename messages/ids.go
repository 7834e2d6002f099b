package messages

import (
	"crypto/rand"
	"encoding/hex"
)

// SessionIDPrefix starts every session id.
const SessionIDPrefix = "cs_"

// sessionIDHexLen is 256 bits in hex.
const sessionIDHexLen = 64

// NewSessionID mints an unguessable session id: "cs_" and 256 random bits
// in lower-case hex. It is minted before anything else happens for a session.
func NewSessionID() string {
	var b [32]byte
	// crypto/rand.Read never returns an error on supported platforms
	// (Go 1.24+ crashes the program instead), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	return SessionIDPrefix + hex.EncodeToString(b[:])
}

// ValidSessionID reports whether id has the exact shape NewSessionID makes.
// It is checked before an id touches the filesystem.
func ValidSessionID(id string) bool {
	if len(id) != len(SessionIDPrefix)+sessionIDHexLen || id[:len(SessionIDPrefix)] != SessionIDPrefix {
		return false
	}
	for _, c := range id[len(SessionIDPrefix):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func validateSessionID(op, id string) error {
	if id == "" {
		return FieldError(op, "sessionId", "required")
	}
	if !ValidSessionID(id) {
		return FieldError(op, "sessionId", "malformed session id")
	}
	return nil
}

// MinIDPrefixHex is the fewest hex digits a session id prefix may have, so
// a stray short word never picks a session.
const MinIDPrefixHex = 4

// SessionIDPrefixOf returns the start of a session id that s stands for, as
// docker and nomad accept ids: "cs_" is added when s lacks it, and what
// follows must be at least MinIDPrefixHex lower-case hex digits (a whole id
// is a prefix of itself). ok is false for anything else.
func SessionIDPrefixOf(s string) (prefix string, ok bool) {
	if len(s) >= len(SessionIDPrefix) && s[:len(SessionIDPrefix)] == SessionIDPrefix {
		s = s[len(SessionIDPrefix):]
	}
	if len(s) < MinIDPrefixHex || len(s) > sessionIDHexLen {
		return "", false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return SessionIDPrefix + s, true
}

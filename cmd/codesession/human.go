package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/codesession/codesession/messages"
)

// humanMessage is how err reads to a person: a typed error says its safe
// message (with the field it is about, and its code in brackets, which is
// what scripts and the docs name), never the chain of operations that
// carried it; anything else says its own text.
func humanMessage(err error) string {
	var ue *usageError
	if errors.As(err, &ue) {
		var me *messages.Error
		if !errors.As(ue.err, &me) {
			return ue.err.Error()
		}
	}
	var me *messages.Error
	if !errors.As(err, &me) {
		return err.Error()
	}
	msg := me.Message
	if me.Field != "" && !strings.Contains(msg, me.Field) {
		msg = me.Field + ": " + msg
	}
	if msg == "" {
		msg = string(me.Code)
	}
	// remoteErr's own advice ("check --token ...") wraps the typed error
	if outer := err.Error(); strings.HasSuffix(outer, ")") {
		if i := strings.LastIndex(outer, " ("); i > 0 && strings.Contains(outer[:i], me.Error()) {
			msg += outer[i:]
		}
	}
	return fmt.Sprintf("%s [%s]", msg, me.Code)
}

var (
	initialAboveRE = regexp.MustCompile(`initialPosture (\S+) is above maxPosture`)
	postureAboveRE = regexp.MustCompile(`posture (\S+) is above the session's maxPosture`)
	scopeAboveRE   = regexp.MustCompile(`maxPosture (\S+) is above this scope's ceiling (\S+)`)
)

// hintFor names the flag or command that fixes err, when there is one.
func hintFor(cmd string, err error) string {
	var me *messages.Error
	if !errors.As(err, &me) {
		return ""
	}
	switch me.Code {
	case messages.CodeCeilingExceeded:
		if m := initialAboveRE.FindStringSubmatch(me.Message); m != nil {
			return fmt.Sprintf("raise the session's ceiling too: --max-posture %s --posture %s", m[1], m[1])
		}
		if m := postureAboveRE.FindStringSubmatch(me.Message); m != nil {
			return fmt.Sprintf("a session's ceiling is fixed at its start: start a new one with --max-posture %s", m[1])
		}
		if m := scopeAboveRE.FindStringSubmatch(me.Message); m != nil {
			return fmt.Sprintf("your token's scope caps postures at %s: use --max-posture %s, or ask the daemon's admin to raise the scope's maxPosture", m[2], m[2])
		}
	case messages.CodeNotLive:
		if cmd != "resume" && strings.Contains(me.Message, "resume it") {
			return "codesession resume SESSION"
		}
	case messages.CodeNotFound:
		if me.Op == "diff" {
			return "" // the session was found; its turn (or diff) was not: ls would not help
		}
		return "codesession ls lists the sessions your token can see"
	}
	return ""
}

// plainJSON renders raw JSON compactly for a person: no HTML escapes
// (\u0026 for &) and no insignificant space.
func plainJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

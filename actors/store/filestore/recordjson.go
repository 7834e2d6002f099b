package filestore

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// appendRecordJSON appends rec as encoding/json.Marshal writes it (HTML
// escaping on, no newline), without reflection: every record change goes
// through the WAL as its JSON, and json.Marshal of a record was about 12 us
// and a dozen allocations each at 10,000 sessions. ok is false, with b
// unchanged, for a record encoding/json refuses (a time it cannot write as
// RFC 3339, a NaN or infinite cost); the caller leaves it to encoding/json,
// which says why. The output is byte for byte json.Marshal's
// (recordjson_test.go compares the two field by field, on randomized and
// fuzzed records, and fails when a field is added that this does not
// write), so meta.json and the WAL never depend on which encoder wrote them.
func appendRecordJSON(b []byte, r *messages.SessionRecord) (_ []byte, ok bool) {
	orig := b
	b = append(b, `{"sessionId":`...)
	b = appendJSONStringHTML(b, r.SessionID)
	b = append(b, `,"backendId":`...)
	b = appendJSONStringHTML(b, r.BackendID)
	b = append(b, `,"cwd":`...)
	b = appendJSONStringHTML(b, r.Cwd)
	b = optStringHTML(b, `,"model":`, r.Model)
	b = optStringHTML(b, `,"effort":`, string(r.Effort))
	b = append(b, `,"maxPosture":`...)
	b = appendJSONStringHTML(b, string(r.MaxPosture))
	b = append(b, `,"posture":`...)
	b = appendJSONStringHTML(b, string(r.Posture))
	b = optInt(b, `,"maxRounds":`, r.MaxRounds)
	if b, ok = optFloat(b, `,"maxCostUsd":`, r.MaxCostUSD); !ok {
		return orig, false
	}
	b = optStrings(b, `,"allowedTools":`, r.AllowedTools)
	b = append(b, `,"taskBrief":`...)
	b = appendJSONStringHTML(b, r.TaskBrief)
	b = optStrings(b, `,"taskTags":`, r.TaskTags)
	b = append(b, `,"status":`...)
	b = appendJSONStringHTML(b, string(r.Status))
	if b, ok = appendTimeField(b, `,"createdAt":"`, r.CreatedAt); !ok {
		return orig, false
	}
	if b, ok = appendTimeField(b, `,"updatedAt":"`, r.UpdatedAt); !ok {
		return orig, false
	}
	b = append(b, `,"roundsElapsed":`...)
	b = strconv.AppendInt(b, int64(r.RoundsElapsed), 10)
	if b, ok = optFloat(b, `,"costUsd":`, r.CostUSD); !ok {
		return orig, false
	}
	b = append(b, `,"runs":`...)
	if r.Runs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Runs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendRunJSON(b, &r.Runs[i]); !ok {
				return orig, false
			}
		}
		b = append(b, ']')
	}
	b = optStringHTML(b, `,"outcome":`, string(r.Outcome))
	b = optStringHTML(b, `,"outcomeNote":`, r.OutcomeNote)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	if w := r.Worktree; w != nil {
		b = append(b, `,"worktree":{"path":`...)
		b = appendJSONStringHTML(b, w.Path)
		b = append(b, `,"branch":`...)
		b = appendJSONStringHTML(b, w.Branch)
		b = append(b, `,"repo":`...)
		b = appendJSONStringHTML(b, w.Repo)
		b = append(b, `,"base":`...)
		b = appendJSONStringHTML(b, w.Base)
		b = append(b, '}')
	}
	if p := r.Provision; p != nil {
		b = append(b, `,"provision":{"capabilityIds":`...)
		b = appendStrings(b, p.CapabilityIDs)
		b = optStrings(b, `,"applied":`, p.Applied)
		b = optStrings(b, `,"ignored":`, p.Ignored)
		if len(p.Tiers) > 0 {
			b = append(b, `,"tiers":{`...)
			var room [16]string // a provision's few capabilities, on the stack
			keys := room[:0]
			for k := range p.Tiers {
				keys = append(keys, k)
			}
			slices.Sort(keys) // encoding/json sorts a map's keys
			for i, k := range keys {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONStringHTML(b, k)
				b = append(b, ':')
				b = appendJSONStringHTML(b, p.Tiers[k])
			}
			b = append(b, '}')
		}
		b = optStrings(b, `,"awaitingApproval":`, p.AwaitingApproval)
		b = optStrings(b, `,"tokenScopeNotes":`, p.TokenScopeNotes)
		b = optStrings(b, `,"notes":`, p.Notes)
		b = optStringHTML(b, `,"manifest":`, p.Manifest)
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// appendRunJSON is one entry of a record's runs.
func appendRunJSON(b []byte, r *messages.Run) (_ []byte, ok bool) {
	if b, ok = appendTimeField(b, `{"startedAt":"`, r.StartedAt); !ok {
		return b, false
	}
	b = optStringHTML(b, `,"externalSessionId":`, r.ExternalSessionID)
	b = append(b, `,"ownerScopeId":`...)
	b = appendJSONStringHTML(b, r.OwnerScopeID)
	b = optStringHTML(b, `,"runtime":`, r.Runtime)
	if c := r.Containment; c != nil {
		b = append(b, `,"containment":{"landlockAbi":`...)
		b = strconv.AppendInt(b, int64(c.LandlockABI), 10)
		b = optStrings(b, `,"writable":`, c.Writable)
		b = optStrings(b, `,"readDenied":`, c.ReadDenied)
		b = optStrings(b, `,"readAllowed":`, c.ReadAllowed)
		b = optBool(b, `,"readsOpen":true`, c.ReadsOpen)
		b = append(b, `,"network":`...)
		b = appendJSONStringHTML(b, c.Network)
		if len(c.ConnectTCP) > 0 {
			b = append(b, `,"connectTcp":[`...)
			for i, p := range c.ConnectTCP {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendUint(b, uint64(p), 10)
			}
			b = append(b, ']')
		}
		b = optStrings(b, `,"relayed":`, c.Relayed)
		b = optStrings(b, `,"bestEffort":`, c.BestEffort)
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// appendTimeField is key (its opening quote included) and t as
// time.Time.MarshalJSON writes it; false for a time it refuses (a year
// outside 0-9999, a zone offset of 24 hours or more).
func appendTimeField(b []byte, key string, t time.Time) ([]byte, bool) {
	b = append(b, key...)
	b, err := t.AppendText(b)
	if err != nil {
		return b, false
	}
	return append(b, '"'), true
}

// optStrings is key and the list when it is not empty (omitempty).
func optStrings(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	return appendStrings(append(b, key...), ss)
}

// appendStrings is a list of strings; null for a nil one.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONStringHTML(b, s)
	}
	return append(b, ']')
}

func optStringHTML(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONStringHTML(append(b, key...), s)
}

// recScratch holds the buffers records are encoded in before they are
// copied to a slice of their own size (the one the session keeps).
var recScratch = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// recordJSON encodes rec into a pooled scratch buffer and hands it to use,
// newline included; the buffer is reused once use returns, so use copies
// what it keeps. Records appendRecordJSON leaves to encoding/json go
// through json.Marshal, which also says why it refuses one.
func recordJSON(rec *messages.SessionRecord, use func([]byte)) error {
	bp := recScratch.Get().(*[]byte)
	defer recScratch.Put(bp)
	b, ok := appendRecordJSON((*bp)[:0], rec)
	if !ok {
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		b = append(b[:0], data...)
	}
	b = append(b, '\n')
	if cap(b) <= 64<<10 {
		*bp = b
	}
	use(b)
	return nil
}

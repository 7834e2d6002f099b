package native

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeFastMatchesUnmarshal: the pooled decoder reads every event of
// every stream case, and events it must refuse or that fail half-way (a
// field of the wrong type, trailing data, a truncated or empty value),
// one after the other, as json.Unmarshal reads each alone: the same
// fields, the same failures, nothing of one event left in the next.
func TestDecodeFastMatchesUnmarshal(t *testing.T) {
	var events []string
	cases := streamCases()
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range append(names, "") {
		body := modelmockStream(t)
		if name != "" {
			body = cases[name]
		}
		for _, line := range strings.Split(body, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				events = append(events, data)
			}
		}
	}
	require.Greater(t, len(events), 50)
	odd := []string{
		`{"type":"content_block_delta","index":"one","delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}} {"type":"message_stop"}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}} x`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`,
		``,
		`null`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":"many"}}`,
		`  {"type":"message_stop"}  `,
		`{"type":"message_start","message":{"model":"m","content":[{"type":"text"}],"usage":{"input_tokens":1}}}`,
	}
	// each odd one between two ordinary events, then every event again
	var all []string
	for i, o := range odd {
		all = append(all, events[i%len(events)], o, events[(i+1)%len(events)])
	}
	all = append(all, events...)
	for i, data := range all {
		var got, want fastEvent
		gotErr := decodeFast([]byte(data), &got)
		wantErr := json.Unmarshal([]byte(data), &want)
		assert.Equal(t, wantErr == nil, gotErr == nil, "event %d %q: %v against %v", i, data, gotErr, wantErr)
		if wantErr == nil {
			assert.Equal(t, want, got, "event %d %q", i, data)
		}
	}
}

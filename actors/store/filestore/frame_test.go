package filestore

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
)

// TestEncodeEventsFrame: the events are encoded once, into their WAL frame;
// the frame's body is exactly the events.jsonl lines, the frames decode as
// the WAL reads them (events first, then the record), and frameBody finds
// the lines.
func TestEncodeEventsFrame(t *testing.T) {
	evs := encodeBenchEvents(3)
	rec := []byte(`{"sessionId":"cs_frame"}` + "\n")
	buf, err := encodeEventsFrame(store.OpAppend, "cs_frame", evs, rec)
	require.NoError(t, err)
	defer putBuffer(buf)

	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	for _, ev := range evs {
		require.NoError(t, enc.Encode(ev))
	}
	assert.Equal(t, want.String(), string(frameBody(buf.Bytes())), "the body is the events.jsonl lines")

	frames, good, err := readFrames(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, int64(buf.Len()), good, "both frames hold")
	require.Len(t, frames, 2)
	assert.Equal(t, frame{kind: frameEvents, sid: "cs_frame", body: want.Bytes()}, frames[0])
	assert.Equal(t, frame{kind: frameRecord, sid: "cs_frame", body: rec}, frames[1])
	assert.Equal(t, encodeFrame(frameEvents, "cs_frame", want.Bytes()), buf.Bytes()[:good-int64(len(encodeFrame(frameRecord, "cs_frame", rec)))],
		"the same bytes as a frame made from the lines")
}

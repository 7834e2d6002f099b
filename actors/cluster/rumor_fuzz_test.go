package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeRumor: a rumor arrives from the network, so any bytes a peer
// (or a stranger on the gossip port) sends are decoded without a panic, and
// whatever decodes as a rumor encodes back to one that decodes the same.
func FuzzDecodeRumor(f *testing.F) {
	for _, r := range []rumor{
		{Kind: rumorSuspect, Node: "n3", Boot: 1733475000, Inc: 4, From: "n1"},
		{Kind: rumorAlive, Node: "n3", Boot: 1733475000, Inc: 5, From: "n3"},
	} {
		b, err := encodeRumor(r)
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2]) // cut off mid-message
	}
	f.Add([]byte{})
	f.Add([]byte{rumorV1})
	f.Add([]byte{2, 0x80}) // another version's first byte
	f.Add([]byte("\x01not msgpack at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := decodeRumor(b)
		if !ok {
			return
		}
		again, err := encodeRumor(r)
		require.NoError(t, err)
		r2, ok := decodeRumor(again)
		require.True(t, ok, "a decoded rumor re-encodes to one that does not decode")
		require.Equal(t, r, r2)
	})
}

package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/messages"
)

// TestBackendsSaysWhichAttach: backends lists each backend's attach
// command, and says when there is none.
func TestBackendsSaysWhichAttach(t *testing.T) {
	var out bytes.Buffer
	writeBackendsTable(&out, messages.ListBackendsResult{Backends: []messages.BackendListing{
		{Descriptor: messages.Descriptor{ID: "gemini", ExternalAttach: &messages.ExternalAttach{CommandTemplate: "gemini --resume {sessionId}"}}},
		{Descriptor: messages.Descriptor{ID: "kilo"}},
	}})
	assert.Contains(t, out.String(), "  gemini: gemini --resume {sessionId}\n")
	assert.Contains(t, out.String(), "  kilo: -\n")
}

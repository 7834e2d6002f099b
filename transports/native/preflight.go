package native

import (
	"net/http"

	"github.com/codesession/codesession/transports"
)

// Preflight reports, before a session exists, whether Open would refuse
// spec's environment: no API key for the provider, or an unknown provider.
// It builds the provider without sending anything.
func (t *Transport) Preflight(spec transports.SessionSpec) error {
	_, err := newProvider(t.envLookup(spec.Env), &http.Client{})
	return err
}

package script

import "github.com/codesession/codesession/transports"

// Preflight reports, before a session exists, whether Open would refuse
// spec's scenario (a missing or malformed CODESESSION_SCRIPT file): the
// runtime then refuses the start as invalid instead of recording a failed
// session.
func (t *Transport) Preflight(spec transports.SessionSpec) error {
	_, err := t.scenarioFor(spec)
	return err
}

package controlplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/messages"
)

func TestApprovalsRoutesAndProvisionOnTheDetail(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "playwright.config.ts"), []byte("export default {}\n"), 0o644))
	st := f.start("check the page")

	var d struct {
		Record   messages.SessionRecord `json:"record"`
		Manifest *curation.Manifest     `json:"manifest"`
	}
	f.ok("GET", "/api/code-sessions/"+st.SessionID, nil, &d)
	require.NotNil(t, d.Record.Provision, "the record says what curation did")
	require.Equal(t, []string{"playwright"}, d.Record.Provision.CapabilityIDs)
	require.Equal(t, []string{"playwright"}, d.Record.Provision.AwaitingApproval)
	require.NotNil(t, d.Manifest, "the detail carries the launch manifest")
	require.Equal(t, "check the page", d.Manifest.Brief)
	require.Equal(t, curation.SHA256Hex([]byte("check the page")), d.Manifest.BriefSHA256)

	var list struct {
		Approvals []messages.Approval `json:"approvals"`
	}
	f.ok("GET", "/api/approvals", nil, &list)
	require.Len(t, list.Approvals, 1)
	a := list.Approvals[0]
	require.Equal(t, messages.ApprovalPending, a.Status)
	require.Equal(t, "playwright", a.CapabilityID)

	r := f.call("POST", "/api/approvals", map[string]any{"id": a.ID, "decision": "perhaps"})
	require.Equal(t, messages.CodeInvalid, r.code())
	r = f.call("POST", "/api/approvals", map[string]any{"id": "nope@0", "decision": "approve"})
	require.Equal(t, messages.CodeNotFound, r.code())
	var got messages.Approval
	f.ok("POST", "/api/approvals", map[string]any{"id": a.ID, "decision": "approve"}, &got)
	require.Equal(t, messages.ApprovalApproved, got.Status)
	f.ok("GET", "/api/approvals", nil, &list)
	require.Equal(t, messages.ApprovalApproved, list.Approvals[0].Status)
}

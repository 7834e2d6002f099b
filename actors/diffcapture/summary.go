package diffcapture

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/codesession/codesession/messages"
)

// Default caps of a turn diff.
const (
	// DefaultMaxDiffBytes caps the unified diff, marker line included.
	DefaultMaxDiffBytes = 64 << 10
	// DefaultMaxFiles caps the file list; the rest are counted in FilesOmitted.
	DefaultMaxFiles = 200
)

// truncMarker is the line that ends a unified diff cut at the cap.
func truncMarker(capBytes int) string {
	return fmt.Sprintf("[diff truncated: the whole diff exceeds the %d-byte cap; the file list and summary cover every file]\n", capBytes)
}

// shortStat is git's one-line summary: "3 files changed, 10 insertions(+),
// 2 deletions(-)", with git's rules for singulars and zero counts.
func shortStat(files []messages.FileChange) string {
	if len(files) == 0 {
		return "no changes"
	}
	ins, del := 0, 0
	for _, f := range files {
		ins += f.Insertions
		del += f.Deletions
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s changed", len(files), plural(len(files), "file", "files"))
	if ins > 0 || del == 0 {
		fmt.Fprintf(&b, ", %d %s(+)", ins, plural(ins, "insertion", "insertions"))
	}
	if del > 0 || ins == 0 {
		fmt.Fprintf(&b, ", %d %s(-)", del, plural(del, "deletion", "deletions"))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// capFiles keeps the first maxFiles files and counts the rest.
func capFiles(files []messages.FileChange, maxFiles int) ([]messages.FileChange, int) {
	if files == nil {
		files = []messages.FileChange{}
	}
	if maxFiles > 0 && len(files) > maxFiles {
		return files[:maxFiles:maxFiles], len(files) - maxFiles
	}
	return files, 0
}

// gitDiff assembles a git-sourced TurnDiff from the file list and the
// unified diff (patchCut: git's output went past capBytes and was stopped).
func gitDiff(all []messages.FileChange, patch []byte, patchCut bool, capBytes, maxFiles int) messages.TurnDiff {
	d := messages.TurnDiff{Source: messages.DiffGit, Summary: shortStat(all)}
	d.Files, d.FilesOmitted = capFiles(all, maxFiles)
	if patchCut || len(patch) > capBytes {
		d.UnifiedDiff = truncatePatch(patch, capBytes)
		d.Truncated = true
	} else {
		d.UnifiedDiff = string(patch)
	}
	return d
}

// truncatePatch cuts patch to fit capBytes together with the marker, at a
// line end when there is one, else at a rune boundary.
func truncatePatch(patch []byte, capBytes int) string {
	marker := truncMarker(capBytes)
	keep := max(capBytes-len(marker), 0)
	if keep > len(patch) {
		keep = len(patch)
	}
	head := patch[:keep]
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	} else {
		head = head[:max(len(head)-1, 0)] // room for the line end
		for len(head) > 0 && !utf8.Valid(head) {
			head = head[:len(head)-1]
		}
		if len(head) > 0 {
			head = append(head[:len(head):len(head)], '\n')
		}
	}
	return string(head) + marker
}

// ToolEventDiff is the fallback when git cannot say what changed: each path
// the agent's edit tools named, as a modification without line counts
// (source tool-events); no paths is source none. Absolute paths inside cwd
// are made relative to it. why, when set, says why git was not used.
func ToolEventDiff(cwd string, editPaths []string, maxFiles int, why string) messages.TurnDiff {
	seen := map[string]bool{}
	files := []messages.FileChange{}
	for _, p := range editPaths {
		if p == "" {
			continue
		}
		p = relTo(cwd, p)
		if seen[p] {
			continue
		}
		seen[p] = true
		files = append(files, messages.FileChange{Path: p, Status: "M"})
	}
	if why != "" {
		why = " (" + why + ")"
	}
	if len(files) == 0 {
		return messages.TurnDiff{Source: messages.DiffNone, Files: files, Summary: "no changes seen: no git diff" + why + " and no edit-tool events"}
	}
	d := messages.TurnDiff{Source: messages.DiffToolEvents,
		Summary: fmt.Sprintf("%d %s edited, from edit-tool events without line counts%s", len(files), plural(len(files), "file", "files"), why)}
	d.Files, d.FilesOmitted = capFiles(files, maxFiles)
	return d
}

func relTo(cwd, p string) string {
	if cwd == "" || !filepath.IsAbs(p) {
		return p
	}
	rel, err := filepath.Rel(cwd, p)
	if err != nil || !filepath.IsLocal(rel) {
		return p
	}
	return filepath.ToSlash(rel)
}

// noneDiff is a capture that failed: source none, the problem as warning.
func noneDiff(problem string) messages.TurnDiff {
	return messages.TurnDiff{Source: messages.DiffNone, Files: []messages.FileChange{},
		Summary: "no diff: the capture failed", Warning: problem}
}

package gemini

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codesession/codesession/transports"
)

// beforeLoad keeps gemini 0.61's session/load from erasing the session it
// loads. gemini names a chat file session-<UTC minute>-<first 8 of the
// id>.jsonl, and session/load first starts a fresh recording under the
// loaded id, appending its context-only message list to the file of that
// name when it exists: in the minute the session was created that is the
// session's own file, whose conversation then reads as empty ("No
// previous sessions found for this project"), for this load and every
// later one. So a resume in the creation minute waits for the next one.
func beforeLoad(ctx context.Context, spec transports.SessionSpec) error {
	d := loadWait(geminiHome(spec), spec.ResumeExternalID, time.Now())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loadWait is how long to wait at now before loading session id, whose
// chat files are under home/.gemini/tmp/<project>/chats: until a second
// into the next minute when one was created in now's minute, else 0.
func loadWait(home, id string, now time.Time) time.Duration {
	if home == "" || len(id) < 8 {
		return 0
	}
	files, _ := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+filepath.Base(id[:8])+".jsonl"))
	minute := now.UTC().Format("2006-01-02T15-04")
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "session-"+minute+"-") {
			return now.UTC().Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now.UTC())
		}
	}
	return 0
}

// geminiHome is the HOME the session's gemini runs with: the session's
// own, else the daemon's.
func geminiHome(spec transports.SessionSpec) string {
	if spec.Home != "" {
		return spec.Home
	}
	h, _ := os.UserHomeDir()
	return h
}

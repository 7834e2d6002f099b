package curation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/codesession/codesession/messages"
)

// ManifestFile is the launch manifest's name in the provision directory.
const ManifestFile = "manifest.json"

// Manifest says what a session ran from (seed 002's launch bundle): the
// brief, posture and policy, the backend's argv and CLI version, every
// provisioned file and the persona, each file with its sha256. It is
// written once at start and never overwritten; cleanup leaves it.
type Manifest struct {
	Version      int                 `json:"version"`
	SessionID    string              `json:"sessionId"`
	CreatedAt    time.Time           `json:"createdAt"`
	Cwd          string              `json:"cwd"`
	Brief        string              `json:"brief"`
	BriefSHA256  string              `json:"briefSha256"`
	Backend      string              `json:"backend"`
	CLIVersion   string              `json:"cliVersion,omitempty"`
	Argv         []string            `json:"argv,omitempty"`
	Posture      messages.Posture    `json:"posture"`
	MaxPosture   messages.Posture    `json:"maxPosture"`
	Policy       ManifestPolicy      `json:"policy"`
	Provision    *messages.Provision `json:"provision,omitempty"`
	Files        []ManifestEntry     `json:"files"`
	Persona      string              `json:"persona,omitempty"`
	PersonaSHA   string              `json:"personaSha256,omitempty"`
	SystemPrompt string              `json:"appendSystemPromptSha256,omitempty"`
}

// ManifestPolicy is the session's policy at launch.
type ManifestPolicy struct {
	MaxRounds    int      `json:"maxRounds,omitempty"`
	AllowedTools []string `json:"allowedTools,omitempty"`
	Isolate      string   `json:"isolate,omitempty"`
	OwnerScope   string   `json:"ownerScope,omitempty"`
}

// ManifestEntry is one file the session ran from.
type ManifestEntry struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// SHA256Hex is the hex sha256 of data.
func SHA256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// WriteManifest hashes the files (paths relative to dir) into m and
// writes dir/manifest.json once, 0600: an existing manifest is kept as it
// is (a resumed session ran first from that one) and its path returned.
func WriteManifest(dir string, m Manifest, files []string) (string, error) {
	p := filepath.Join(dir, ManifestFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	m.Version = 1
	m.BriefSHA256 = SHA256Hex([]byte(m.Brief))
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return "", err
		}
		m.Files = append(m.Files, ManifestEntry{Path: rel, Bytes: int64(len(b)), SHA256: SHA256Hex(b)})
	}
	if m.Files == nil {
		m.Files = []ManifestEntry{}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return p, nil
	}
	if err != nil {
		return "", err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	return p, f.Close()
}

// ReadManifest reads a session's manifest.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

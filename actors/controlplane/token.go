package controlplane

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/codesession/codesession/messages"
)

// TokenFile is the bearer token's file name under the home.
const TokenFile = "token"

// TokenPath returns where the bearer token of the daemon using home lives.
func TokenPath(home string) string { return filepath.Join(home, TokenFile) }

// LoadOrCreateToken reads the bearer token from <home>/token, creating it
// (256 random bits in hex, mode 0600, written with O_EXCL so two daemons
// starting at once agree) when it does not exist. created says whether this
// call made it, so the caller prints it once. A token file that others can
// read, or that is empty, is refused.
func LoadOrCreateToken(home string) (token string, created bool, err error) {
	path := TokenPath(home)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", false, fmt.Errorf("token: %w", err)
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms (Go 1.24+)
	tok := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(tok + "\n")
		if werr == nil {
			werr = f.Sync()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return "", false, fmt.Errorf("token: write %s: %w", path, werr)
		}
		return tok, true, nil
	case !errors.Is(err, fs.ErrExist):
		return "", false, fmt.Errorf("token: create %s: %w", path, err)
	}
	tok, err = ReadToken(home)
	return tok, false, err
}

// ReadToken reads an existing token file (the CLI's side). It refuses a
// file that group or others may read.
func ReadToken(home string) (string, error) {
	return readTokenAt(TokenPath(home))
}

func readTokenAt(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token: %s is readable by others (mode %v): chmod 600 it, or delete it to make a new one", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token: %s is empty: delete it to make a new one", path)
	}
	return tok, nil
}

// authorized reports whether r carries the bearer token, compared in
// constant time. An empty want disables the check.
func authorized(r *http.Request, want string) bool {
	if want == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, got, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) == 1
}

var errUnauthorized = messages.Errorf(messages.CodeUnauthorized, "auth", "a valid bearer token is required (Authorization: Bearer <token from $CODESESSION_HOME/token>)")

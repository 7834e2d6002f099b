package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listeningRE = regexp.MustCompile(`listening on https?://(\S+)`)

// waitListening waits for serve's "listening on" line and returns the address.
func waitListening(t *testing.T, stderr *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := listeningRE.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the daemon did not start listening; stderr:\n%s", stderr.String())
	return ""
}

// opsScenario asks permission on an ASK turn, blocks on a SLOW one, and
// echoes (at $0.50 a turn) otherwise.
const opsScenario = `{"turns": [
  {"match": "ASK", "steps": [{"text": "I will vet it"},
     {"tool": {"name": "Bash", "input": {"command": "go vet ./..."}, "output": "", "ask": true}}, {"text": "vetted"}]},
  {"match": "SLOW", "steps": [{"text": "working on it"}, {"delay": "60s"}, {"text": "finished"}]}],
 "fallback": {"steps": [{"text": "reply to turn {{turn}}: {{input}}"}], "costUsd": 0.5}}`

// inProcessDaemon runs `codesession serve` in this process on a random
// port; stop cancels it and returns its exit code.
func inProcessDaemon(t *testing.T, home, scenario string) (addr string, stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &syncBuffer{}
	env := map[string]string{"CODESESSION_HOME": home, "CODESESSION_BACKEND": "script", "HOME": home}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--env", "CODESESSION_SCRIPT=" + scenario},
			func(k string) string { return env[k] }, nil, io.Discard, stderr)
	}()
	var once sync.Once
	code := -1
	stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { stop() })
	return waitListening(t, stderr), stderr, stop
}

func TestOpsConsoleDrivesASessionThroughTheDaemon(t *testing.T) {
	home := t.TempDir()
	addr, serveErr, stopDaemon := inProcessDaemon(t, home, writeScenario(t, opsScenario))
	assert.Contains(t, serveErr.String(), "created the bearer token", "the token is printed once, at creation")
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home}}
	cli := func(args ...string) result {
		t.Helper()
		return runCLI(t, inv, append(args[:1:1], append([]string{"--addr", addr}, args[1:]...)...)...)
	}
	cwd := t.TempDir()

	r := cli("start", "--json", "--cwd", cwd, "--backend", "script", "--tag", "ops", "ASK then vet")
	require.Equal(t, 0, r.code, r.stderr)
	var st messages.StartResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	sid := st.SessionID
	require.True(t, messages.ValidSessionID(sid))

	r = cli("read", "--json", sid)
	require.Equal(t, 0, r.code, r.stderr)
	var tr messages.TurnResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tr))
	require.Equal(t, messages.KindClarification, tr.Kind)

	r = cli("answer", sid, tr.ClarificationID, "allow")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "answered "+tr.ClarificationID+" (Bash): allow_once")

	r = cli("read", sid)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "== turn 1: turn_complete")
	assert.Contains(t, r.stdout, "vetted")

	r = cli("guide", sid, "now the docs")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "guidance sent (queue)\n", r.stdout)
	r = cli("read", "--json", sid)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tr))
	assert.Equal(t, messages.KindTurnComplete, tr.Kind)
	assert.Equal(t, 2, tr.Turn)
	assert.Contains(t, tr.Text, "now the docs")

	r = cli("posture", sid, "plan")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "posture is now plan\n", r.stdout)
	r = cli("posture", sid, "full")
	assert.Equal(t, 2, r.code, "above the ceiling: refused for what was asked")
	assert.Contains(t, r.stderr, "ceiling_exceeded")

	r = cli("stop", "--outcome", "success", "--note", "docs done", sid)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stopped session "+sid+": outcome success\n", r.stdout)
	r = cli("stop", "--json", sid)
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"ok":true,"alreadyStopped":true,"outcome":"success"}`, r.stdout)

	r = cli("ls")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^ID\s+BACKEND\s+MODEL\s+STATUS\s+ROUNDS\s+COST\s+AGE$`, lines[0])
	assert.Regexp(t, `^`+sid[:11]+`\s+script\s+-\s+ended\s+2/50\s+\$0\.5000\s+\d+s$`, lines[1], "a short id (unique, at least 8 hex digits)")
	assert.Equal(t, "1 session, $0.5000 in all", lines[2])
	for _, l := range lines {
		assert.LessOrEqual(t, len(l), 100, "fits 100 columns: %q", l)
	}
	r = cli("ls", "-o", "wide")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^`+sid+`\s+script\s+-\s+ended\s+plan\s+2/50\s+\$0\.5000\s+\d+s\s+`+regexp.QuoteMeta(cwd)+`\s+-$`, r.stdout)
	r = cli("ls", "-o", "id")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, sid+"\n", r.stdout)
	r = cli("ls", "--status", "running,failed")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no sessions\n", r.stdout, "filtered out by status")
	r = cli("ls", "--status", "ended", "--backend", "script", "--since", "1h", "-o", "id")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, sid+"\n", r.stdout)
	r = cli("ls", "--backend", "codex", "-o", "id")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	r = cli("ls", "-o", "yaml")
	assert.Equal(t, 2, r.code)
	r = cli("ls", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list struct{ Sessions []messages.SessionRecord }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Sessions, 1)
	assert.Equal(t, []string{"ops"}, list.Sessions[0].TaskTags)

	r = cli("show", sid)
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{"session " + sid, "status    ended (outcome success: docs done)", "backend   script",
		"posture   plan (ceiling acceptEdits)", "rounds    2 of 50   cost $0.5000", "run 1", "guidance      user/queue: now the docs",
		"released      explicit, outcome success: docs done"} {
		assert.Contains(t, r.stdout, want)
	}
	r = cli("show", "--json", "--events", "3", sid)
	require.Equal(t, 0, r.code, r.stderr)
	var detail sessionDetail
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &detail))
	require.Len(t, detail.Events, 3)
	assert.Equal(t, detail.LastSeq, detail.Events[2].Seq)
	assert.Equal(t, messages.EvReleased, detail.Events[2].Event.Type)

	r = cli("tail", sid)
	require.Equal(t, 0, r.code, r.stderr)
	tl := strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.Len(t, tl, int(detail.LastSeq), "every stored event, one per line")
	assert.True(t, strings.HasPrefix(tl[0], "#1 "), tl[0])

	r = cli("attach", sid)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no interactive resume command")

	r = cli("guide", sid, "more please")
	assert.Equal(t, 1, r.code, "the session is not live")
	assert.Contains(t, r.stderr, "not_live")

	r = cli("read", "cs_nope")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Try: codesession read --help")
	r = cli("show", messages.NewSessionID())
	assert.Equal(t, 1, r.code, "not_found is exit 1")
	assert.NotContains(t, r.stderr, "Try:", "a missing session is not a usage error")
	assert.NotContains(t, r.stderr, "store.", "no internal call path")
	r = cli("ls", "--token", "wrong")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "unauthorized")

	r = runCLI(t, invocation{env: map[string]string{"CODESESSION_HOME": home}}, "backends", "--addr", addr, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"id":"script"`)

	require.Equal(t, 0, stopDaemon(), serveErr.String())
	assert.Contains(t, serveErr.String(), "codesession serve: stopped")
	r = cli("ls")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "cannot reach the daemon")
}

func TestOpsUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start"}, "want one BRIEF"},
		{[]string{"start", "--posture", "root", "x"}, "--posture"},
		{[]string{"answer", messages.NewSessionID(), "c1"}, "want SESSION CLARIFICATION DECISION"},
		{[]string{"answer", messages.NewSessionID(), "c1", "maybe"}, "DECISION"},
		{[]string{"guide", "--mode", "shout", messages.NewSessionID(), "x"}, "unknown mode"},
		{[]string{"stop", "--outcome", "great", messages.NewSessionID()}, "unknown outcome"},
		{[]string{"tail"}, "name a SESSION"},
		{[]string{"tail", "-f", "--after", "3"}, "--after needs a SESSION"},
		{[]string{"tail", "--topics", "all", messages.NewSessionID()}, "unknown topic"},
		{[]string{"serve", "--tls-cert", "c.pem"}, "go together"},
		{[]string{"serve", "--addr", "0.0.0.0:7777"}, "not a loopback address"},
		{[]string{"ls", "--addr", "ftp://x"}, "--addr"},
	} {
		r := runCLI(t, invocation{}, c.args...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.Contains(t, r.stderr, "Try: codesession", "%v", c.args)
	}
	r := runCLI(t, invocation{}, "ls")
	assert.Equal(t, 2, r.code, "no token in a fresh home")
	assert.Contains(t, r.stderr, "no token")
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key as PEM.
func selfSignedCert(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "codesession test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certPath, keyPath
}

func TestServeTLS(t *testing.T) {
	home := t.TempDir()
	cert, key := selfSignedCert(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	env := map[string]string{"CODESESSION_HOME": home, "HOME": home}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key},
			func(k string) string { return env[k] }, nil, io.Discard, stderr)
	}()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "listening on https://") }, time.Minute, 20*time.Millisecond)
	addr := listeningRE.FindStringSubmatch(stderr.String())[1]
	inv := invocation{env: map[string]string{"CODESESSION_HOME": home}}

	r := runCLI(t, inv, "ls", "--addr", "https://"+addr, "--cacert", cert)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no sessions\n", r.stdout)
	r = runCLI(t, inv, "ls", "--addr", "https://"+addr)
	assert.Equal(t, 1, r.code, "an unknown CA is refused")
	assert.Contains(t, r.stderr, "certificate")
	r = runCLI(t, inv, "ls", "--addr", "http://"+addr, "--cacert", cert)
	assert.Equal(t, 1, r.code, "plain HTTP to a TLS port fails")
}

func TestShortIDsAreUniquePrefixes(t *testing.T) {
	a := "cs_abcd1234" + strings.Repeat("0", 56)
	b := "cs_abcd1234" + strings.Repeat("0", 20) + strings.Repeat("1", 36)
	c := "cs_ffff0000" + strings.Repeat("2", 56)
	got := shortIDs([]string{a, b, c})
	assert.Equal(t, "cs_ffff0000", got[c], "8 hex digits when nothing shares them")
	assert.Equal(t, a[:32], got[a], "one digit past what it shares with its neighbour")
	assert.Equal(t, b[:32], got[b])
	for id, short := range got {
		for other := range got {
			if other != id {
				assert.False(t, strings.HasPrefix(other, short), "%s is a prefix of %s", short, other)
			}
		}
	}
}

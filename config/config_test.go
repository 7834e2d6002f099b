package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsValidate(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
}

func TestLayering(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"defaultBackend":"script","defaultMaxRounds":7,"sessionLifetime":"1h","env":{"A":"1"}}`), 0o600))
	c, err := Load(file, env(map[string]string{"CODESESSION_MAX_ROUNDS": "9", "CODESESSION_HOME": dir}))
	require.NoError(t, err)
	assert.Equal(t, "script", c.DefaultBackend)       // file over default
	assert.Equal(t, 9, c.DefaultMaxRounds)            // env over file
	assert.Equal(t, time.Hour, c.SessionLifetime.D()) // file
	assert.Equal(t, dir, c.Home)                      // env
	assert.Equal(t, []string{"A=1"}, c.EnvList())
	require.NoError(t, c.Validate())
}

func TestHomeConfigFileIsOptional(t *testing.T) {
	dir := t.TempDir()
	c, err := Load("", env(map[string]string{"CODESESSION_HOME": dir}))
	require.NoError(t, err)
	assert.Equal(t, dir, c.Home)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"logLevel":"debug"}`), 0o600))
	c, err = Load("", env(map[string]string{"CODESESSION_HOME": dir}))
	require.NoError(t, err)
	assert.Equal(t, "debug", c.LogLevel)
}

func TestStrictFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown key": `{"defaultBackend":"x","nope":1}`,
		"bad type":    `{"defaultMaxRounds":"many"}`,
		"bad dur":     `{"sessionLifetime":"forever"}`,
		"trailing":    `{} {}`,
		"not json":    `defaultBackend = x`,
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(dir, name+".json")
			require.NoError(t, os.WriteFile(f, []byte(body), 0o600))
			_, err := Load(f, env(nil))
			assert.Error(t, err)
		})
	}
	_, err := Load(filepath.Join(dir, "missing.json"), env(nil))
	assert.Error(t, err, "an explicitly named file must exist")
}

func TestBadEnv(t *testing.T) {
	_, err := Load("", env(map[string]string{"CODESESSION_HOME": t.TempDir(), "CODESESSION_MAX_POSTURE": "root"}))
	assert.ErrorContains(t, err, "CODESESSION_MAX_POSTURE")
	_, err = Load("", env(map[string]string{"CODESESSION_HOME": t.TempDir(), "CODESESSION_MAX_ROUNDS": "x"}))
	assert.ErrorContains(t, err, "CODESESSION_MAX_ROUNDS")
}

func TestValidateNamesFields(t *testing.T) {
	c := Default()
	c.DefaultMaxPosture = "root"
	c.DefaultMaxRounds = -1
	c.Supervision.Strategy = "all-for-none"
	c.Env = map[string]string{"A=B": "x"}
	c.LogLevel = "loud"
	err := c.Validate()
	require.Error(t, err)
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		require.True(t, errors.As(e, &fe))
		fields = append(fields, fe.Field)
	}
	assert.ElementsMatch(t, []string{"defaultMaxPosture", "defaultMaxRounds", "supervision.strategy", "env", "logLevel"}, fields)
	_ = messages.PosturePlan
}

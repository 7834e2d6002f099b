package subprocess

import "strings"

// EnvValue is the last value of key in env (KEY=VALUE entries), or "".
func EnvValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

package subprocess

import "strings"

// Environ is a child process's environment: base (this process's, as a
// rule) without the names drop holds (other vendors' credentials, Node
// options), then HOME when home is set, then each of layers in order (the
// transport's entries, then the session's). A name set more than once
// keeps its last value, at the place where it first stood.
func Environ(base []string, drop map[string]bool, home string, layers ...[]string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	for _, l := range layers {
		env = append(env, l...)
	}
	return Dedup(env)
}

// Dedup keeps the last entry of each name, in the order of first
// appearance.
func Dedup(env []string) []string {
	last := map[string]string{}
	var order []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = kv
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, last[k])
	}
	return out
}

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

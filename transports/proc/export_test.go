package proc

import "os"

// BaseAllow is the allowlist of every backend's environment.
var BaseAllow = baseAllow

// MatchCompiled matches name against patterns compiled as IsCredential's
// are, for comparison with a path.Match loop.
func MatchCompiled(patterns []string, name string) bool {
	return compilePatterns(patterns).match(name)
}

// RefuseRemoval makes the sweep's removals of temporary folders fail with
// err until the returned func restores them.
func RefuseRemoval(err error) (restore func()) {
	removeAll = func(string) error { return err }
	return func() { removeAll = os.RemoveAll }
}

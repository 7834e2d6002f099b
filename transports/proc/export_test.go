package proc

// BaseAllow is the allowlist of every backend's environment.
var BaseAllow = baseAllow

// MatchCompiled matches name against patterns compiled as IsCredential's
// are, for comparison with a path.Match loop.
func MatchCompiled(patterns []string, name string) bool {
	return compilePatterns(patterns).match(name)
}

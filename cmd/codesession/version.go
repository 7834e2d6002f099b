package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version or VCS revision from the build info is used.
var version = ""

type versionCmd struct{}

func versionCommand() command {
	return command{
		name:    "version",
		summary: "print the version of codesession and of Go it was built with",
		usage:   "version",
		flags:   func() *pflag.FlagSet { return newFlagSet("version") },
		parse: func(args []string) (runner, error) {
			fs := newFlagSet("version")
			if err := parseFlags(fs, args); err != nil {
				return nil, err
			}
			if fs.NArg() > 0 {
				return nil, usagef("version", "takes no arguments")
			}
			return versionCmd{}, nil
		},
	}
}

func (versionCmd) exec(_ context.Context, s *streams) error {
	fmt.Fprintf(s.stdout, "codesession %s (%s %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion is the link-time version, else the module version, else the
// VCS revision (marked +dirty when the tree had changes), else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		return "devel " + rev + dirty
	}
	return "devel"
}

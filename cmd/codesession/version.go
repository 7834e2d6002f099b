package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version or VCS revision from the build info is used.
var version = ""

type versionCmd struct{ json bool }

func versionCommand() command {
	return command{
		name:    "version",
		summary: "print the version of codesession and of Go it was built with",
		usage:   "version [--json]",
		flags:   func() *pflag.FlagSet { return (&versionCmd{}).flagSet() },
		parse: func(args []string) (runner, error) {
			c := versionCmd{}
			fs := c.flagSet()
			if err := parseFlags(fs, args); err != nil {
				return nil, err
			}
			if fs.NArg() > 0 {
				return nil, usagef("version", "takes no arguments")
			}
			return c, nil
		},
	}
}

func (c *versionCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("version")
	fs.BoolVar(&c.json, "json", false, "print the version, module, commit and Go as one JSON object")
	fs.StringVar(new(string), "home", "", "accepted as every command accepts it; version reads nothing from a home")
	return fs
}

// versionInfo is what `version --json` prints, from the build info.
type versionInfo struct {
	Version  string `json:"version"`
	Module   string `json:"module"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func readVersionInfo() versionInfo {
	v := versionInfo{Version: buildVersion(), Module: "github.com/codesession/codesession", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path != "" {
			v.Module = bi.Main.Path
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func (c versionCmd) exec(_ context.Context, s *streams) error {
	v := readVersionInfo()
	if c.json {
		return writeJSON(s.stdout, v)
	}
	commit := ""
	if v.Commit != "" && !strings.Contains(v.Version, v.Commit[:min(12, len(v.Commit))]) {
		commit = ", commit " + v.Commit[:min(12, len(v.Commit))]
		if v.Modified {
			commit += "+dirty"
		}
	}
	fmt.Fprintf(s.stdout, "codesession %s (%s %s, module %s%s)\n", v.Version, v.Go, v.Platform, v.Module, commit)
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

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

// helpCmd prints the command list, or one command's usage.
type helpCmd struct {
	topic string
}

func helpCommand() command {
	return command{
		name:    "help",
		summary: "list the commands, or show one command's usage",
		usage:   "help [COMMAND]",
		flags:   func() *pflag.FlagSet { return newFlagSet("help") },
		parse:   parseHelpFlags,
	}
}

func parseHelpFlags(args []string) (runner, error) {
	fs := newFlagSet("help")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 1 {
		return nil, usagef("help", "want at most one command, got %d arguments", fs.NArg())
	}
	return &helpCmd{topic: fs.Arg(0)}, nil
}

func (c *helpCmd) exec(_ context.Context, s *streams) error {
	if c.topic == "" {
		writeHelp(s.stdout)
		return nil
	}
	cmd, ok := findCommand(c.topic)
	if !ok {
		return usagef("help", "unknown command %q", c.topic)
	}
	writeCommandHelp(s.stdout, cmd)
	return nil
}

// writeHelp lists the commands.
func writeHelp(w io.Writer) {
	fmt.Fprintln(w, "codesession drives coding agents as supervised multi-turn sessions.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: codesession <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'codesession <command> --help' for a command's flags.")
	fmt.Fprintln(w, "Exit codes: 0 success, 1 the session failed or ended in error, 2 usage or configuration error, "+
		"20 founder credentials in the environment refused the start.")
}

// writeCommandHelp prints one command's synopsis and flags.
func writeCommandHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "Usage: codesession %s\n\n%s.\n", c.usage, upperFirst(c.summary))
	if fs := c.flags(); fs.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
)

// completionCmd prints a shell completion script generated from the
// command table and each command's pflag set, so it never falls behind
// them: commands, flags (with the postures as values of the posture
// flags), and session ids (from `codesession ls -o id`) where a command
// takes a SESSION.
type completionCmd struct{ shell, home string }

func completionCommand() command {
	return command{
		name:    "completion",
		summary: "print a shell completion script: bash, zsh or fish",
		usage:   "completion bash|zsh|fish   (e.g. source <(codesession completion bash))",
		flags:   func() *pflag.FlagSet { return completionFlags(new(string)) },
		parse: func(args []string) (runner, error) {
			const cmd = "completion"
			var home string
			fs := completionFlags(&home)
			if err := parseFlags(fs, args); err != nil {
				return nil, err
			}
			if fs.NArg() != 1 {
				return nil, usagef(cmd, "want one shell: bash, zsh or fish")
			}
			switch sh := fs.Arg(0); sh {
			case "bash", "zsh", "fish":
				return completionCmd{shell: sh, home: home}, nil
			default:
				return nil, usagef(cmd, "unknown shell %q: want bash, zsh or fish", sh)
			}
		},
	}
}

// completionFlags: --home makes the script list that home's sessions.
func completionFlags(home *string) *pflag.FlagSet {
	fs := newFlagSet("completion")
	fs.StringVar(home, "home", "", "complete the session ids of this home (the script passes it to 'codesession ls')")
	return fs
}

func (c completionCmd) exec(_ context.Context, s *streams) error {
	specs := completionSpecs()
	var b strings.Builder
	switch c.shell {
	case "bash":
		writeBashCompletion(&b, specs)
	case "zsh":
		writeZshCompletion(&b, specs)
	default:
		writeFishCompletion(&b, specs)
	}
	script := b.String()
	if c.home != "" {
		abs, err := filepath.Abs(c.home)
		if err != nil {
			return usagef("completion", "--home %q: %v", c.home, err)
		}
		script = strings.ReplaceAll(script, "codesession ls -o id", "codesession ls --home "+shellQuote(abs)+" -o id")
	}
	_, err := io.WriteString(s.stdout, script)
	return err
}

// shellQuote quotes s for bash, zsh and fish alike (single quotes; a
// single quote inside is closed, escaped and reopened).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// completionSpec is what a completion script knows of one command.
type completionSpec struct {
	name, summary string
	flags         []*pflag.Flag
	session       bool // takes a SESSION argument
}

func completionSpecs() []completionSpec {
	var out []completionSpec
	for _, c := range commands() {
		sp := completionSpec{name: c.name, summary: c.summary, session: strings.Contains(c.usage, "SESSION")}
		c.flags().VisitAll(func(f *pflag.Flag) { sp.flags = append(sp.flags, f) })
		out = append(out, sp)
	}
	return out
}

// What a flag takes after it.
const (
	argNone    = iota // a bool switch
	argValue          // any value
	argPosture        // one of the postures
)

func flagArg(f *pflag.Flag) int {
	switch {
	case f.Name == "posture" || f.Name == "max-posture":
		return argPosture
	case f.Value.Type() == "bool":
		return argNone
	}
	return argValue
}

var postureWords = strings.Join([]string{string(messages.PosturePlan), string(messages.PostureDefault),
	string(messages.PostureAcceptEdits), string(messages.PostureFull)}, " ")

func writeBashCompletion(w io.Writer, specs []completionSpec) {
	var names []string
	for _, sp := range specs {
		names = append(names, sp.name)
	}
	fmt.Fprintf(w, `# bash completion for codesession; load with: source <(codesession completion bash)
_codesession() {
	local cur prev opts session=0
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case "$prev" in
	--posture|--max-posture) COMPREPLY=($(compgen -W %q -- "$cur")); return ;;
	esac
	case "${COMP_WORDS[1]}" in
`, strings.Join(names, " "), postureWords)
	for _, sp := range specs {
		var fl []string
		for _, f := range sp.flags {
			fl = append(fl, "--"+f.Name)
		}
		session := 0
		if sp.session {
			session = 1
		}
		fmt.Fprintf(w, "\t%s) opts=%q; session=%d ;;\n", sp.name, strings.Join(fl, " "), session)
	}
	fmt.Fprint(w, `	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	elif [ "$session" -eq 1 ]; then
		local ids
		ids="$(codesession ls -o id 2>/dev/null)"
		# a bare hex prefix completes too: SESSION is accepted without cs_
		if [[ "$cur" != cs_* ]]; then ids="${ids//cs_/}"; fi
		COMPREPLY=($(compgen -W "$ids" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _codesession codesession
`)
}

// zshQuote makes s safe inside a single-quoted _arguments spec.
func zshQuote(s string) string {
	r := strings.NewReplacer("'", `'\''`, "[", "(", "]", ")", ":", `\:`)
	return r.Replace(s)
}

func writeZshCompletion(w io.Writer, specs []completionSpec) {
	fmt.Fprint(w, `#compdef codesession
# zsh completion for codesession; load with: source <(codesession completion zsh)
_codesession_sessions() {
	local -a ids
	ids=(${(f)"$(codesession ls -o id 2>/dev/null)"})
	ids+=(${ids#cs_}) # a bare hex prefix completes too
	_describe 'session' ids
}
_codesession() {
	local -a cmds
	cmds=(
`)
	for _, sp := range specs {
		fmt.Fprintf(w, "\t\t'%s:%s'\n", sp.name, zshQuote(sp.summary))
	}
	fmt.Fprint(w, `	)
	if (( CURRENT == 2 )); then
		_describe 'command' cmds
		return
	fi
	case $words[2] in
`)
	for _, sp := range specs {
		fmt.Fprintf(w, "\t%s)\n\t\t_arguments -s", sp.name)
		for _, f := range sp.flags {
			arg := ""
			switch flagArg(f) {
			case argPosture:
				arg = ":posture:(" + postureWords + ")"
			case argValue:
				arg = ":" + f.Name + ":"
			}
			fmt.Fprintf(w, " \\\n\t\t\t'--%s[%s]%s'", f.Name, zshQuote(f.Usage), arg)
		}
		if sp.session {
			fmt.Fprint(w, " \\\n\t\t\t'1:session:_codesession_sessions' '*::arg:_files'")
		} else {
			fmt.Fprint(w, " \\\n\t\t\t'*::arg:_files'")
		}
		fmt.Fprint(w, "\n\t\t;;\n")
	}
	fmt.Fprint(w, "\tesac\n}\ncompdef _codesession codesession\n")
}

// fishQuote makes s safe inside a single-quoted fish string.
func fishQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s)
}

func writeFishCompletion(w io.Writer, specs []completionSpec) {
	fmt.Fprint(w, "# fish completion for codesession; load with: codesession completion fish | source\ncomplete -c codesession -f\n")
	for _, sp := range specs {
		fmt.Fprintf(w, "complete -c codesession -n __fish_use_subcommand -a %s -d '%s'\n", sp.name, fishQuote(sp.summary))
		cond := "__fish_seen_subcommand_from " + sp.name
		for _, f := range sp.flags {
			extra := ""
			switch flagArg(f) {
			case argPosture:
				extra = " -x -a '" + postureWords + "'"
			case argValue:
				extra = " -r"
			}
			fmt.Fprintf(w, "complete -c codesession -n '%s' -l %s -d '%s'%s\n", cond, f.Name, fishQuote(f.Usage), extra)
		}
		if sp.session {
			fmt.Fprintf(w, "complete -c codesession -n '%s' -a '(codesession ls -o id 2>/dev/null; codesession ls -o id 2>/dev/null | string replace -r \"^cs_\" \"\")'\n", cond)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/learning/lessons"
	"github.com/codesession/codesession/learning/outcomes"
)

// lessonsCmd shows the lesson book, runs a distillation pass now, or
// prints the injection block a dispatch would get.
type lessonsCmd struct {
	cfg    configFlags
	json   bool
	action string // list, distill, block
	filter lessons.Filter
	tags   []string
}

func (c *lessonsCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("lessons")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.StringVar(&c.filter.Backend, "backend", "", "block: the backend of the dispatch")
	fs.StringVar(&c.filter.Model, "model", "", "block: the model of the dispatch")
	fs.StringArrayVar(&c.tags, "tag", nil, "block: a task tag of the dispatch (repeatable)")
	c.cfg.addConfig(fs)
	c.cfg.addHome(fs)
	return fs
}

func lessonsCommand() command {
	return command{
		name:    "lessons",
		summary: "list distilled lessons, run a distillation pass, show the injection block",
		usage:   "lessons [list|distill|block] [--json] [--backend B --model M --tag T]",
		flags:   func() *pflag.FlagSet { return (&lessonsCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseLessonsFlags(args) },
	}
}

func parseLessonsFlags(args []string) (*lessonsCmd, error) {
	c := &lessonsCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		c.action = "list"
	case 1:
		c.action = fs.Arg(0)
	default:
		return nil, usagef("lessons", "takes one action, got %q", strings.Join(fs.Args(), " "))
	}
	switch c.action {
	case "list", "distill", "block":
	default:
		return nil, usagef("lessons", "unknown action %q (want list, distill or block)", c.action)
	}
	c.filter.Tags = c.tags
	return c, nil
}

func (c *lessonsCmd) exec(ctx context.Context, s *streams) error {
	cfg, err := c.cfg.load("lessons", s.getenv)
	if err != nil {
		return err
	}
	st := lessons.NewStore(outcomes.Dir(cfg.Home))
	switch c.action {
	case "distill":
		m, err := lessons.NewModel(lessons.ModelConfig{Provider: cfg.Learning.Provider, Model: cfg.Learning.Model}, s.getenv)
		if err != nil {
			return err
		}
		log, err := outcomes.OpenLog(cfg.Home)
		if err != nil {
			return err
		}
		all, _ := log.All()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		rep, err := lessons.Pass(ctx, st, all, lessons.PassOptions{Model: m, Now: time.Now()})
		if err != nil {
			return fmt.Errorf("the distillation pass failed (nothing changed): %w", err)
		}
		if c.json {
			return writeJSON(s.stdout, rep)
		}
		fmt.Fprintf(s.stdout, "distilled %d new outcome(s) with %s: %d proposed, %d created, %d reinforced, %d without independent evidence; evicted %d (decay) and %d (cap); %d lessons\n",
			rep.Outcomes, orDash(rep.Model), rep.Proposed, rep.Created, rep.Reinforced, rep.Unsupported, rep.EvictedDecay, rep.EvictedCap, rep.Lessons)
		for _, w := range rep.Warnings {
			fmt.Fprintf(s.stderr, "warning: %s\n", w)
		}
		return nil
	case "block":
		book, err := st.Load()
		if err != nil {
			return err
		}
		c.filter.Known = actors.DefaultBackends().IDs()
		block := lessons.Block(book, c.filter, time.Now())
		if c.json {
			return writeJSON(s.stdout, map[string]string{"block": block})
		}
		if block == "" {
			fmt.Fprintln(s.stderr, "no lesson qualifies (evidence >= 2 and a matching scope): nothing is injected")
			return nil
		}
		_, err = fmt.Fprint(s.stdout, block)
		return err
	default:
		book, err := st.Load()
		if err != nil {
			return err
		}
		book.Decay(time.Now())
		if c.json {
			return writeJSON(s.stdout, book)
		}
		if len(book.Lessons) == 0 {
			fmt.Fprintln(s.stdout, "no lessons yet")
			return nil
		}
		tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCONFIDENCE\tEVIDENCE\tSCOPE\tLESSON")
		for _, l := range book.Lessons {
			scope := strings.Trim(strings.Join([]string{l.Scope.Backend, l.Scope.Model, strings.Join(l.Scope.Tags, ",")}, " "), " ")
			fmt.Fprintf(tw, "%s\t%.2f\t%d\t%s\t%s\n", l.ID, l.Confidence, l.Evidence, orDash(scope), l.Text)
		}
		return tw.Flush()
	}
}

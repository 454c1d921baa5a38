package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestUsageListsEveryCommand pins that "iterion help" shows every subcommand
// the dispatcher knows, so a new one cannot be left out of the help text.
func TestUsageListsEveryCommand(t *testing.T) {
	var b strings.Builder
	writeUsage(&b)
	for name, c := range commands {
		if !strings.Contains(b.String(), "  "+name+" ") || !strings.Contains(b.String(), c.summary) {
			t.Errorf("usage lacks %q (%s):\n%s\nwant every command listed with its summary", name, c.summary, b.String())
		}
	}
}

// TestHelpStartsWithSynopsisAndExampleAndExitsZero pins every
// subcommand's -h: it is a success (exit 0, no error), and its text starts
// with the usage line, then says what the command does and shows an example
// of the command before listing the flags.
func TestHelpStartsWithSynopsisAndExampleAndExitsZero(t *testing.T) {
	for name, c := range commands {
		var out, stderr, errs strings.Builder
		if code := exitCode(&errs, name, c.run(t.Context(), []string{"-h"}, &out, &stderr)); code != 0 || errs.Len() > 0 {
			t.Errorf("iterion %s -h: got exit %d and %q, want exit 0 and no error: -h is a success", name, code, errs.String())
		}
		h := stderr.String()
		example := strings.Index(h, "\nexample:\n")
		flags := strings.Index(h, "\n  -")
		if !strings.HasPrefix(h, "usage: iterion "+name) || example < 0 || flags < example ||
			!strings.Contains(h[example:flags], "iterion "+name) || strings.Count(h[:example], "\n\n") < 1 {
			t.Errorf("iterion %s -h:\n%s\nwant \"usage: iterion %s\", a synopsis, then an example running it, then the flags", name, h, name)
		}
	}
}

// TestServeHelpListsEveryFlagInOneGroup pins serve -h's groups: each of
// serve's flags is listed under exactly one group, so a new flag cannot go
// missing from the help, and the measurement-only ones come last.
func TestServeHelpListsEveryFlagInOneGroup(t *testing.T) {
	fs := newFlagSet("serve", serveHelp, io.Discard)
	serveFlags(fs, &serveConfig{})
	in := map[string]int{}
	for _, g := range serveHelp.groups {
		for _, f := range g.flags {
			in[f]++
			if fs.Lookup(f) == nil {
				t.Errorf("group %q lists --%s, which serve does not have", g.title, f)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if in[f.Name] != 1 {
			t.Errorf("--%s is in %d groups of serve -h, want exactly 1", f.Name, in[f.Name])
		}
	})
	last := serveHelp.groups[len(serveHelp.groups)-1]
	if !slices.Equal(last.flags, []string{"no-lease", "sweep-mode", "sweep-no-time-budget", "forge-minute", "measure-group-shards"}) {
		t.Errorf("last group of serve -h: got %v, want the measurement-only flags, no-lease, sweep-mode, sweep-no-time-budget, forge-minute and measure-group-shards", last.flags)
	}
}

// TestBadFlagsExitTwo pins Go's flag convention for every subcommand: a
// flag it does not define, or an argument it does not take, is a usage
// error and exits 2, the error on stderr after the command's name.
func TestBadFlagsExitTwo(t *testing.T) {
	for name, c := range commands {
		for _, args := range [][]string{{"--no-such-flag"}, {"stray"}} {
			var errs strings.Builder
			err := c.run(t.Context(), args, io.Discard, io.Discard)
			if code := exitCode(&errs, name, err); code != 2 || !strings.HasPrefix(errs.String(), "iterion "+name+": ") {
				t.Errorf("iterion %s %v: got exit %d and %q, want exit 2 and the error after \"iterion %s: \"", name, args, code, errs.String(), name)
			}
		}
	}
}

// TestErrorsExitOne pins that a subcommand's other errors exit 1 with the
// error on stderr, prefixed by the command's name.
func TestErrorsExitOne(t *testing.T) {
	var b strings.Builder
	code := exitCode(&b, "serve", errors.New("--listen: bad"))
	if code != 1 || b.String() != "iterion serve: --listen: bad\n" {
		t.Errorf("got exit %d and %q, want exit 1 and %q: an error exits 1 naming the command", code, b.String(), "iterion serve: --listen: bad\n")
	}
}

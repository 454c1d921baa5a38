package main

import (
	"errors"
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

// TestHelpExitsZero pins that "iterion NAME -h" is a success for every
// subcommand: the flags are printed and the exit status is 0, not an error.
func TestHelpExitsZero(t *testing.T) {
	for name, c := range commands {
		var b strings.Builder
		if code := exitCode(&b, name, c.run(t.Context(), []string{"-h"})); code != 0 || b.Len() > 0 {
			t.Errorf("iterion %s -h: got exit %d and %q, want exit 0 and no error: -h is a success", name, code, b.String())
		}
	}
}

// TestErrorsExitOne pins that a subcommand's error exits 1 with the error on
// stderr, prefixed by the command's name.
func TestErrorsExitOne(t *testing.T) {
	var b strings.Builder
	code := exitCode(&b, "serve", errors.New("--listen: bad"))
	if code != 1 || b.String() != "iterion serve: --listen: bad\n" {
		t.Errorf("got exit %d and %q, want exit 1 and %q: an error exits 1 naming the command", code, b.String(), "iterion serve: --listen: bad\n")
	}
}

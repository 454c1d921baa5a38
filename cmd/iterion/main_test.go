package main

import (
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

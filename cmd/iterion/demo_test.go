package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoEndsWithTheReport pins the demo's first impression: its output
// names no simulator URL (the simulator dies with the demo), and its last
// line says how to get the report, or, with --report, the absolute path it
// wrote the report to.
func TestDemoEndsWithTheReport(t *testing.T) {
	fast := []string{"--replicas", "3", "--interval", "100ms", "--phase", "1s", "--runs", "1", "--issues", "1"}
	report := filepath.Join(t.TempDir(), "demo.html")
	for _, c := range []struct {
		args     []string
		lastLine string
	}{
		{fast, "run again with --report FILE: iterion demo --report demo.html"},
		{append(fast, "--report", report), "report: " + report + " (open it in a browser)"},
	} {
		var out, errs strings.Builder
		if err := runDemo(t.Context(), c.args, &out, &errs); err != nil {
			t.Fatalf("demo %v: %v\n%s", c.args, err, errs.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if last := lines[len(lines)-1]; !strings.HasSuffix(last, c.lastLine) {
			t.Errorf("demo %v: got last line %q, want it to end %q", c.args, last, c.lastLine)
		}
		if strings.Contains(out.String(), "http://") {
			t.Errorf("demo %v: got a URL in the output, want none: the simulator is gone once the demo exits\n%s", c.args, out.String())
		}
	}
	if b, err := os.ReadFile(report); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("report %s: got %d bytes, %v; want the HTML report with its chart", report, len(b), err)
	}
}

// TestDemoBadSettingIsAUsageErrorNamingItsFlag pins that a setting the
// demo cannot run with exits 2, as every bad flag does, naming the flag,
// before it runs: a --report in a directory that does not exist, or
// naming a directory, too, rather than once the demo has run.
func TestDemoBadSettingIsAUsageErrorNamingItsFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--replicas", "1"}, "--replicas"},
		{[]string{"--interval", "5ms"}, "--interval"},
		{[]string{"--interval", "100ms", "--phase", "150ms"}, "--phase"},
		{[]string{"--runs", "-1"}, "--runs"},
		{[]string{"--issues", "-1"}, "--issues"},
		{[]string{"--report", filepath.Join(t.TempDir(), "missing", "demo.html")}, "--report"},
		{[]string{"--report", t.TempDir()}, "--report"},
	} {
		var msg strings.Builder
		err := runDemo(t.Context(), c.args, io.Discard, io.Discard)
		if code := exitCode(&msg, "demo", err); code != 2 || !strings.Contains(msg.String(), c.flag) {
			t.Errorf("demo %q: exit %d, %q; want exit 2 naming %s", c.args, code, msg.String(), c.flag)
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"iterion.dev/iterion/cmd/iterion/internal/demo"
)

// demoHelp is demo's -h.
var demoHelp = help{
	usage: "iterion demo [flags]",
	about: "Runs N replicas of the server in this process, with an in-memory lease store\n" +
		"and the forge simulator, through four phases: every replica sweeps, the lease\n" +
		"elects one, the leader stops cleanly, the leader crashes. It prints a table of\n" +
		"the forge requests per phase; --report also writes it as an HTML page.",
	example: "iterion demo --report demo.html",
}

// runDemo runs the in-process demo: N replicas, an in-memory lease store and
// the forge simulator, four phases, a table and optionally an HTML report.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoHelp, stderr)
	var cfg demo.Config
	fs.IntVar(&cfg.Replicas, "replicas", 5, "replicas to run in this process")
	fs.DurationVar(&cfg.Interval, "interval", 0, "sweep and board sync interval (default 200ms); each lease's TTL is 3 intervals, its retry 1")
	fs.DurationVar(&cfg.Phase, "phase", 0, "how long phases 1 and 2 are measured (default 4s)")
	fs.IntVar(&cfg.Runs, "runs", 0, "gating runs to seed (default 10)")
	fs.IntVar(&cfg.Issues, "issues", 0, "issues to seed for the board sync (default 10)")
	report := fs.String("report", "", "write a self-contained HTML report with a chart to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *report != "" {
		if err := outputFileProblem(*report); err != nil {
			return usageError{fmt.Errorf("--report %q: %w", *report, err)}
		}
	}
	cfg.Out = stdout
	res, err := demo.Run(ctx, cfg)
	if errors.Is(err, demo.ErrInvalid) {
		return usageError{err} // a bad flag: exit 2
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, res.Table())
	if *report == "" {
		fmt.Fprintln(stdout, reportHint)
		return nil
	}
	path, err := writeReport(res, *report)
	if err != nil {
		return fmt.Errorf("--report %q: %w", *report, err)
	}
	fmt.Fprintf(stdout, "\nreport: %s (open it in a browser)\n", path)
	return nil
}

// reportHint ends the demo's output when it wrote no report: how to get one.
const reportHint = "\nFor the HTML report, with a chart of each replica's forge requests through the\n" +
	"phases, run again with --report FILE: iterion demo --report demo.html"

// writeReport writes res's HTML report to the file name and returns its
// absolute path.
func writeReport(res *demo.Result, name string) (string, error) {
	path, err := filepath.Abs(name)
	if err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := res.WriteReport(f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

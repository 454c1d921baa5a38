package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"iterion.dev/iterion/cmd/iterion/internal/demo"
)

// runDemo runs the in-process demo: N replicas, an in-memory lease store and
// the forge simulator, four phases, a table and optionally an HTML report.
func runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var cfg demo.Config
	fs.IntVar(&cfg.Replicas, "replicas", 5, "replicas to run in this process")
	fs.DurationVar(&cfg.Interval, "interval", 0, "sweep and board sync interval (default 200ms); each lease's TTL is 3 intervals, its retry 1")
	fs.DurationVar(&cfg.Phase, "phase", 0, "how long phases 1 and 2 are measured (default 4s)")
	fs.IntVar(&cfg.Runs, "runs", 0, "gating runs to seed (default 10)")
	fs.IntVar(&cfg.Issues, "issues", 0, "issues to seed for the board sync (default 10)")
	report := fs.String("report", "", "write a self-contained HTML report with a chart to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.Out = os.Stdout
	res, err := demo.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(res.Table())
	if *report == "" {
		return nil
	}
	f, err := os.Create(*report)
	if err != nil {
		return fmt.Errorf("--report %q: %w", *report, err)
	}
	if err := res.WriteReport(f); err != nil {
		f.Close()
		return fmt.Errorf("--report %q: %w", *report, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--report %q: %w", *report, err)
	}
	fmt.Printf("report: %s\n", *report)
	return nil
}

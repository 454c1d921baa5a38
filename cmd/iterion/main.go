// Command iterion elects one replica of a deployment to run each periodic,
// idempotent background job (docs/design.md). Run "iterion help" for its subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// command is one subcommand: its one-line summary and its entry point, which
// gets the arguments after its name and a context cancelled on SIGINT/SIGTERM.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands lists every subcommand; each lives in a file named for it.
var commands = map[string]command{
	"forge-sim": {"serve the GitHub simulator (--listen ADDR --budget N --installations N --repos-per-installation R)", runForgeSim},
	"demo":      {"show one replica sweeping for N, in one process (the README's first command)", runDemo},
	"bench":     {"measure the lease's cost and takeover bounds on real processes (the multi-process harness, full mode)", runBench},
	"serve":     {"run a replica of the merge-gate server (flags or ITERION_* variables; see iterion serve -h)", runServe},
	"leases":    {"list the leases in MongoDB, or force a hand-over: leases release NAME --owner OWNER", runLeases},
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "iterion: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if code := exitCode(os.Stderr, os.Args[1], cmd.run(ctx, os.Args[2:])); code != 0 {
		stop()
		os.Exit(code)
	}
}

// exitCode is the process's exit status for a subcommand's result: 0 for
// success and for -h (flag.ErrHelp: the flag set has printed the usage),
// otherwise 1 after writing "iterion NAME: ERR" to w.
func exitCode(w io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "iterion %s: %v\n", name, err)
	return 1
}

// usage lists every subcommand, by name, on stderr.
func usage() { writeUsage(os.Stderr) }

func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: iterion <command> [flags]\n\ncommands:")
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
}

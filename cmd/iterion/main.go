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
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// command is one subcommand: its one-line summary and its entry point, which
// gets the arguments after its name, a context cancelled on SIGINT/SIGTERM,
// and the process's stdout and stderr.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists every subcommand; each lives in a file named for it.
var commands = map[string]command{
	"forge-sim":     {"serve the GitHub simulator (--listen ADDR --budget N --installations N --repos-per-installation R)", runForgeSim},
	"demo":          {"show one replica sweeping for N, in one process (the README's first command)", runDemo},
	"bench":         {"measure the lease's cost and takeover bounds on real processes (the multi-process harness, full mode)", runBench},
	"serve":         {"run a replica of the merge-gate server (flags or ITERION_* variables; see iterion serve -h)", runServe},
	"leases":        {"list the leases in MongoDB, or force a hand-over: leases release NAME --owner OWNER", runLeases},
	"installations": {"list a server's GitHub App installations: shard, holder, last pass, budgets, open runs", runInstallations},
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
	if code := exitCode(os.Stderr, os.Args[1], cmd.run(ctx, os.Args[2:], os.Stdout, os.Stderr)); code != 0 {
		stop()
		os.Exit(code)
	}
}

// exitCode is the process's exit status for a subcommand's result: 0 for
// success and for -h (flag.ErrHelp: the flag set has printed the usage);
// otherwise, after writing "iterion NAME: ERR" to w, 2 for a usage error
// (a bad flag, argument or setting, as Go's flag package exits) and 1 for
// any other error.
func exitCode(w io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "iterion %s: %v\n", name, err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

// usageError is a bad command line: a flag that does not parse, a stray
// argument, a missing or invalid setting. It exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// help is a subcommand's -h text: the usage line, what the command does,
// an example, and, when its flags are many, the groups they are listed in.
type help struct {
	usage   string // after "usage: ", e.g. "iterion demo [flags]"
	about   string
	example string // one command line or more, each printed indented
	// groups lists the flags by group, in order; nil lists them all, by
	// name, under "flags:".
	groups []flagGroup
}

// flagGroup is a heading of -h and the flags listed under it.
type flagGroup struct {
	title string
	flags []string
}

// newFlagSet returns a flag set named name that writes to stderr and whose
// -h prints h, then the flags.
func newFlagSet(name string, h help, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { h.write(stderr, fs) }
	return fs
}

// write prints h and the flags of fs to w.
func (h help) write(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nexample:\n", h.usage, h.about)
	for line := range strings.Lines(h.example) {
		fmt.Fprintf(w, "  %s\n", strings.TrimSuffix(line, "\n"))
	}
	groups := h.groups
	if groups == nil {
		var all []string
		fs.VisitAll(func(f *flag.Flag) { all = append(all, f.Name) })
		groups = []flagGroup{{"flags", all}}
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		// A flag set of the group's flags prints them as the flag package does.
		gs := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		gs.SetOutput(w)
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				gs.Var(f.Value, f.Name, f.Usage)
				gs.Lookup(name).DefValue = f.DefValue
			}
		}
		gs.PrintDefaults()
	}
}

// parseFlags parses args with fs and allows no argument after the flags.
// Errors but flag.ErrHelp are usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// outputFileProblem says why path cannot be a file a command writes once
// it has run (demo's --report, bench's --out), or nil: its directory must
// exist and path must not be a directory. It is checked before the
// command runs, so a typo costs a usage error, not the run's result.
func outputFileProblem(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory, want a file")
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("want a file in an existing directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("want a file in an existing directory: %s is not a directory", dir)
	}
	return nil
}

// programProblem says why path cannot be a program a command starts
// (bench's --bin and --dev-mongo-bin), or nil: it must be an executable
// regular file.
func programProblem(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("want an executable file, not a directory or a device")
	case fi.Mode().Perm()&0o111 == 0:
		return errors.New("want an executable file: it has no execute permission")
	}
	return nil
}

// usage lists every subcommand, by name, on stderr.
func usage() { writeUsage(os.Stderr) }

func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: iterion <command> [flags]\n\ncommands:")
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-13s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun \"iterion <command> -h\" for a command's flags and an example.")
}

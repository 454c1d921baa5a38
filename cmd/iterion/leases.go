package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
)

// runLeases lists the leases of a deployment's store, or, as
// "leases release NAME --owner OWNER", forces a hand-over.
func runLeases(ctx context.Context, args []string) error {
	return leases(ctx, args, os.Getenv, os.Stdout, os.Stderr, time.Now)
}

// leaseRow is one lease as `iterion leases --json` prints it.
type leaseRow struct {
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"` // RFC 3339
	Expired bool      `json:"expired"`
}

// leases is runLeases with its environment, output and clock as arguments.
func leases(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, now func() time.Time) error {
	release := len(args) > 0 && args[0] == "release"
	if release {
		args = args[1:]
	}
	fs := flag.NewFlagSet("leases", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mongoURI := fs.String("mongo-uri", getenv("ITERION_MONGO_URI"), "MongoDB URI of the lease store [$ITERION_MONGO_URI]")
	mongoDB := fs.String("mongo-db", "iterion", "MongoDB database name [$ITERION_MONGO_DB]")
	if v := getenv("ITERION_MONGO_DB"); v != "" {
		*mongoDB = v
	}
	asJSON := fs.Bool("json", false, "print JSON: [{name, owner, expires, expired}]")
	owner := fs.String("owner", "", "release: the owner the lease is released from (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: iterion leases --mongo-uri URI [--json]\n       iterion leases release NAME --owner OWNER --mongo-uri URI")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the usage
	} else if err != nil {
		return err
	}
	var name string
	if release && fs.NArg() > 0 {
		// NAME may come before the flags: parse what follows it too.
		name = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case *mongoURI == "":
		return errors.New("--mongo-uri (ITERION_MONGO_URI) is required: leases live in the deployment's MongoDB")
	case release && strings.TrimSpace(name) == "":
		return errors.New("release: the lease NAME is required: iterion leases release NAME --owner OWNER")
	case release && strings.TrimSpace(*owner) == "":
		return errors.New("release: --owner is required: the holder the lease is taken from")
	}
	client, db, err := connectMongo(ctx, *mongoURI, *mongoDB)
	if err != nil {
		return err
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	st := mongolease.NewStore(db)
	if release {
		if err := st.Release(ctx, name, *owner); errors.Is(err, lease.ErrLost) {
			return fmt.Errorf("release %q from %q: not released, another owner holds it now: %w", name, *owner, err)
		} else if err != nil {
			return fmt.Errorf("release %q from %q: %w", name, *owner, err)
		}
		fmt.Fprintf(stdout, "released %s from %s (if it held it); a replica takes it over within one retry\n", name, *owner)
		return nil
	}
	holders, err := st.Holders(ctx)
	if err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	t := now()
	rows := make([]leaseRow, len(holders))
	for i, h := range holders {
		rows[i] = leaseRow{Name: h.Name, Owner: h.Owner, Expires: h.Expires.UTC(), Expired: !t.Before(h.Expires)}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tEXPIRES\tSTATE")
	for _, r := range rows {
		state := "held"
		if r.Expired {
			state = "expired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Owner, r.Expires.Format(time.RFC3339Nano), state)
	}
	return tw.Flush()
}

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

	"iterion.dev/iterion/internal/page"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
)

// runLeases lists the leases of a deployment's store, or, as
// "leases release NAME --owner OWNER", forces a hand-over.
func runLeases(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return leases(ctx, args, os.Getenv, stdout, stderr, time.Now)
}

// leasesHelp is leases' -h.
var leasesHelp = help{
	usage: "iterion leases --mongo-uri URI [--groups] [--json]\n       iterion leases release NAME --owner OWNER --mongo-uri URI",
	about: "Lists the leases in a deployment's MongoDB: each net's holder and when its\n" +
		"lease expires; with --groups, each lease group's shards by owner, every\n" +
		"member's count against its share, and the unheld shards, or that nobody\n" +
		"serves a group whose leases all expired. \"release\" takes\n" +
		"a lease from its holder, which steps down at its next renewal; another\n" +
		"replica is elected within one retry: a forced hand-over.",
	example: "iterion leases --mongo-uri mongodb://db:27017/\n" +
		"iterion leases release merge-gate-sweeper --owner iterion-0-a1b2 --mongo-uri mongodb://db:27017/\n",
}

// leaseRow is one lease as `iterion leases --json` prints it.
type leaseRow struct {
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"` // RFC 3339
	Expired bool      `json:"expired"`
}

// leases is runLeases with its environment, output and clock as arguments.
func leases(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, now func() time.Time) (rerr error) {
	release := len(args) > 0 && args[0] == "release"
	if release {
		args = args[1:]
	}
	fs := newFlagSet("leases", leasesHelp, stderr)
	mongoURI := fs.String("mongo-uri", getenv("ITERION_MONGO_URI"), "MongoDB URI of the lease store [$ITERION_MONGO_URI]")
	mongoDB := fs.String("mongo-db", "iterion", "MongoDB database name [$ITERION_MONGO_DB]")
	if v := getenv("ITERION_MONGO_DB"); v != "" {
		*mongoDB = v
	}
	asJSON := fs.Bool("json", false, "print JSON: [{name, owner, expires, expired}]; with --groups, the groups")
	groups := fs.Bool("groups", false, "print only the lease groups: each one's shards by owner, every member's count against its share, the unheld shards")
	owner := fs.String("owner", "", "release: the owner the lease is released from (required)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the usage
	} else if err != nil {
		return usageError{err}
	}
	var name string
	if release && fs.NArg() > 0 {
		// NAME may come before the flags: parse what follows it too.
		name = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return usageError{err}
		}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	case *mongoURI == "":
		return usageError{errors.New("--mongo-uri (ITERION_MONGO_URI) is required: leases live in the deployment's MongoDB")}
	case mongoURIProblem(*mongoURI) != nil:
		return usageError{fmt.Errorf("--mongo-uri %q: %w", redactURI(*mongoURI), redactErr(mongoURIProblem(*mongoURI), *mongoURI))}
	case mongoDBNameProblem(*mongoDB) != "":
		return usageError{fmt.Errorf("--mongo-db %q: %s", *mongoDB, mongoDBNameProblem(*mongoDB))}
	case release && strings.TrimSpace(name) == "":
		return usageError{errors.New("release: the lease NAME is required: iterion leases release NAME --owner OWNER")}
	case release && strings.TrimSpace(*owner) == "":
		return usageError{errors.New("release: --owner is required: the holder the lease is taken from")}
	}
	defer func() { rerr = redactErr(rerr, *mongoURI) }() // no error quotes the password
	client, db, err := connectMongo(ctx, *mongoURI, *mongoDB)
	if err != nil {
		return err
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	st := mongolease.NewStore(db)
	if release {
		return releaseLease(ctx, st, name, *owner, stdout)
	}
	if *groups {
		return listGroups(ctx, st, *asJSON, stdout, now())
	}
	return listLeases(ctx, st, *asJSON, stdout, now())
}

// inspectableStore is a lease store that can list its leases, as both
// twins can.
type inspectableStore interface {
	lease.Store
	lease.Inspector
}

// errNoSuchLease reports a release of a lease the store does not keep.
var errNoSuchLease = errors.New("no such lease")

// heldError reports a release refused because another owner holds the
// lease.
type heldError struct{ holder, owner string }

func (e *heldError) Error() string { return fmt.Sprintf("held by %s, not %s", e.holder, e.owner) }

// holderOf is the owner of lease name in st, "" when st keeps none.
func holderOf(ctx context.Context, st lease.Inspector, name string) (string, error) {
	hs, err := st.Holders(ctx)
	if err != nil {
		return "", fmt.Errorf("list leases: %w", err)
	}
	for _, h := range hs {
		if h.Name == name {
			return h.Owner, nil
		}
	}
	return "", nil
}

// releaseLease is `leases release NAME --owner OWNER`: it prints "released"
// when owner held name and no longer does; otherwise it returns
// errNoSuchLease or a *heldError naming the holder, and releases nothing.
// The store's answer decides: a lease that moves between the read and the
// release is reported as the release found it.
func releaseLease(ctx context.Context, st inspectableStore, name, owner string, stdout io.Writer) error {
	holder, err := holderOf(ctx, st, name)
	switch {
	case err != nil:
		return fmt.Errorf("release %s: %w", name, err)
	case holder == "":
		return fmt.Errorf("release %s: %w", name, errNoSuchLease)
	case holder != owner:
		return fmt.Errorf("release %s: %w", name, &heldError{holder: holder, owner: owner})
	}
	if err := st.Release(ctx, name, owner); errors.Is(err, lease.ErrLost) {
		// It moved on since the read: name the new holder once, not the
		// store's own wording of the same refusal.
		if holder, herr := holderOf(ctx, st, name); herr == nil && holder != "" {
			return fmt.Errorf("release %s: %w", name, &heldError{holder: holder, owner: owner})
		}
		return fmt.Errorf("release %s: %w", name, err)
	} else if err != nil {
		return fmt.Errorf("release %s: %w", name, err)
	}
	fmt.Fprintf(stdout, "released %s from %s; a replica takes it over within one retry\n", name, owner)
	return nil
}

// listLeases prints every lease in st with its expiry relative to now, or
// with asJSON as [{"name","owner","expires","expired"}].
func listLeases(ctx context.Context, st lease.Inspector, asJSON bool, stdout io.Writer, now time.Time) error {
	holders, err := st.Holders(ctx)
	if err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	rows := make([]leaseRow, len(holders))
	for i, h := range holders {
		rows[i] = leaseRow{Name: h.Name, Owner: h.Owner, Expires: h.Expires.UTC(), Expired: !now.Before(h.Expires)}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tEXPIRES\tAT\tSTATE")
	for _, r := range rows {
		state := "held"
		if r.Expired {
			state = "expired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Owner, page.Relative(r.Expires, now), page.Stamp(r.Expires), state)
	}
	return tw.Flush()
}

// groupRow is one lease group as `iterion leases --groups --json` prints
// it.
type groupRow struct {
	Name   string `json:"name"`
	Shards int    `json:"shards"`
	// Served is false when nobody serves the group with this shard count
	// (lease.GroupView.Served): its leases all expired unreleased. Such a
	// group has no owners and no unheld shards.
	Served bool         `json:"served"`
	Fair   int          `json:"fair_share"` // the most shards a member should hold
	Owners []ownerShare `json:"owners"`
	Unheld []int        `json:"unheld"`
}

// ownerShare is one owner's part of a group: a live member with its share,
// or an owner holding shards without a member lease.
type ownerShare struct {
	Owner  string `json:"owner"`
	Member bool   `json:"member"`
	Target int    `json:"share,omitempty"` // a member's target count
	Shards []int  `json:"shards"`
}

// listGroups prints every lease group st shows at now: its shards by owner,
// each live member's count against its share and the fair share, and the
// unheld shards, or that nobody serves it; with asJSON as [groupRow].
func listGroups(ctx context.Context, st lease.Inspector, asJSON bool, stdout io.Writer, now time.Time) error {
	holders, err := st.Holders(ctx)
	if err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	rows := []groupRow{}
	for _, g := range lease.Groups(holders, now) {
		row := groupRow{Name: g.Name, Shards: g.Shards, Served: g.Served(), Fair: g.Fair(), Owners: []ownerShare{}, Unheld: []int{}}
		if row.Served {
			row.Unheld = g.Unheld()
		}
		for _, h := range g.Holdings() {
			row.Owners = append(row.Owners, ownerShare{Owner: h.Owner, Member: h.Member, Target: h.Target, Shards: h.Shards})
		}
		rows = append(rows, row)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no lease groups")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for i, g := range rows {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if !g.Served {
			fmt.Fprintf(tw, "GROUP %s: %d shards, nobody serves it: its leases expired without being released, as a replica stopped without releasing them leaves them (one killed during a change of the shard count, say); they stay in the store until a replica serving this shard count takes them\n", g.Name, g.Shards)
			continue
		}
		fmt.Fprintf(tw, "GROUP %s: %d shards, fair share %d, unheld: %s\n", g.Name, g.Shards, g.Fair, page.Ranges(g.Unheld))
		fmt.Fprintln(tw, "OWNER\tHELD\tSHARE\tSHARDS")
		for _, o := range g.Owners {
			share := "not a live member"
			if o.Member {
				share = fmt.Sprint(o.Target)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", o.Owner, len(o.Shards), share, page.Ranges(o.Shards))
		}
	}
	return tw.Flush()
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

func TestLeasesReleaseTellsReleasedNoSuchLeaseAndHeldApart(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		why       string
		holder    string // "" : nobody holds the lease
		wantErr   string
		wantOut   string
		wantCode  int
		wantGone  bool
		wantIsErr error
	}{
		{"the owner's lease is released", "web-1", "", "released merge-gate-sweeper from web-1", 0, true, nil},
		{"a lease nobody holds is not found, as kubectl says NotFound", "", "release merge-gate-sweeper: no such lease", "", 1, true, errNoSuchLease},
		{"another owner's lease is refused, naming that owner once", "web-2", "release merge-gate-sweeper: held by web-2, not web-1", "", 1, false, nil},
	} {
		st := lease.NewMemoryStore()
		if c.holder != "" {
			if ok, err := st.Acquire(context.Background(), "merge-gate-sweeper", c.holder, now, time.Minute); !ok || err != nil {
				t.Fatalf("Acquire = %v, %v", ok, err)
			}
		}
		var out strings.Builder
		err := releaseLease(context.Background(), st, "merge-gate-sweeper", "web-1", &out)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if gotErr != c.wantErr || !strings.Contains(out.String(), c.wantOut) {
			t.Errorf("release = %q, %q; want %q, %q: %s", out.String(), gotErr, c.wantOut, c.wantErr, c.why)
		}
		if c.wantIsErr != nil && !errors.Is(err, c.wantIsErr) {
			t.Errorf("release = %v, want it to wrap %v: %s", err, c.wantIsErr, c.why)
		}
		if code := exitCode(io.Discard, "leases", err); code != c.wantCode {
			t.Errorf("exit code %d, want %d: %s", code, c.wantCode, c.why)
		}
		hs, _ := st.Holders(context.Background())
		if gone := len(hs) == 0; gone != c.wantGone {
			t.Errorf("lease gone after release = %v, want %v: %s", gone, c.wantGone, c.why)
		}
	}
}

func TestLeasesListShowsExpiryRelativeToNow(t *testing.T) {
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	st := lease.NewMemoryStore()
	for _, h := range []struct {
		name, owner string
		from        time.Duration
	}{{"forge-board-sync", "web-2", -2 * time.Minute}, {"merge-gate-sweeper", "web-1", 0}} {
		if ok, err := st.Acquire(context.Background(), h.name, h.owner, now.Add(h.from), 90*time.Second); !ok || err != nil {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
	}
	var out strings.Builder
	if err := listLeases(context.Background(), st, false, &out, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"NAME", "OWNER", "EXPIRES", "AT", "STATE"},
		{"forge-board-sync", "web-2", "30 s ago", "2026-09-30T14:59:30.000Z", "expired"},
		{"merge-gate-sweeper", "web-1", "in 1.5 m", "2026-09-30T15:01:30.000Z", "held"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		for _, cell := range w {
			if !strings.Contains(lines[i], cell) {
				t.Errorf("line %d %q lacks %q: expiry relative to now, then the instant at fixed width", i, lines[i], cell)
			}
		}
	}
}

// TestLeasesGroupsShowSharesByOwner pins `iterion leases --groups`: each
// group's shards by owner, every live member's count against its share and
// the fair share, an owner holding shards without a member lease, the
// unheld shards; and the same as JSON.
func TestLeasesGroupsShowSharesByOwner(t *testing.T) {
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	st := lease.NewMemoryStore()
	take := func(name, owner string) {
		t.Helper()
		if ok, err := st.Acquire(context.Background(), name, owner, now, 90*time.Second); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %v, %v", name, ok, err)
		}
	}
	// Group sweeper of 5 shards: members web-1 and web-2; web-1 holds 0
	// and 1, web-2 holds 2, web-9 (no member lease) holds 3; 4 is unheld.
	take(lease.MemberName("sweeper", 5, "web-1"), "web-1")
	take(lease.MemberName("sweeper", 5, "web-2"), "web-2")
	for shard, owner := range []string{"web-1", "web-1", "web-2", "web-9"} {
		take(lease.ShardName("sweeper", 5, shard), owner)
	}
	take("merge-gate-sweeper", "web-1") // no group's: not listed
	var out strings.Builder
	if err := listGroups(context.Background(), st, false, &out, now); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"GROUP sweeper: 5 shards, fair share 3, unheld: 4"},
		{"OWNER", "HELD", "SHARE", "SHARDS"},
		{"web-1", "2", "3", "0-1"},
		{"web-2", "1", "2", "2"},
		{"web-9", "1", "not a live member", "3"},
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		for _, cell := range w {
			if !strings.Contains(lines[i], cell) {
				t.Errorf("line %d %q lacks %q: shards by owner, each count against its share", i, lines[i], cell)
			}
		}
	}
	out.Reset()
	if err := listGroups(context.Background(), st, true, &out, now); err != nil {
		t.Fatal(err)
	}
	var rows []groupRow
	if err := json.Unmarshal([]byte(out.String()), &rows); err != nil {
		t.Fatalf("--groups --json: %v\n%s", err, out.String())
	}
	if got := fmt.Sprintf("%+v", rows); got != "[{Name:sweeper Shards:5 Served:true Fair:3 Owners:[{Owner:web-1 Member:true Target:3 Shards:[0 1]} {Owner:web-2 Member:true Target:2 Shards:[2]} {Owner:web-9 Member:false Target:0 Shards:[3]}] Unheld:[4]}]" {
		t.Errorf("--groups --json = %s, want the same group as the table", got)
	}
}

// TestLeasesGroupsSayNobodyServesAGroupWhoseLeasesExpired pins that
// `iterion leases --groups` shows a shard count whose leases all expired
// unreleased, as a replica killed during a change of --sweep-shards leaves
// them, as the server's /leases page does: a group nobody serves, not one
// of 0 live members whose every shard is unheld; the count that is served
// shows as before.
func TestLeasesGroupsSayNobodyServesAGroupWhoseLeasesExpired(t *testing.T) {
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	st := lease.NewMemoryStore()
	take := func(name, owner string, at time.Time) {
		t.Helper()
		if ok, err := st.Acquire(context.Background(), name, owner, at, 90*time.Second); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %v, %v", name, ok, err)
		}
	}
	// killed served sweeper on 4 shards and stopped renewing 10 minutes
	// ago; web-1 serves it on 2.
	take(lease.MemberName("sweeper", 4, "killed"), "killed", now.Add(-10*time.Minute))
	for shard := range 4 {
		take(lease.ShardName("sweeper", 4, shard), "killed", now.Add(-10*time.Minute))
	}
	take(lease.MemberName("sweeper", 2, "web-1"), "web-1", now)
	take(lease.ShardName("sweeper", 2, 0), "web-1", now)
	var out strings.Builder
	if err := listGroups(context.Background(), st, false, &out, now); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"GROUP sweeper: 2 shards, fair share 2, unheld: 1", "GROUP sweeper: 4 shards, nobody serves it: its leases expired without being released"} {
		if !strings.Contains(text, want) {
			t.Errorf("leases --groups lacks %q: the expired shard count is a group nobody serves, the served one as before:\n%s", want, text)
		}
	}
	if unwanted := "GROUP sweeper: 4 shards, fair share"; strings.Contains(text, unwanted) {
		t.Errorf("leases --groups says %q: a group nobody serves has no members, shares or unheld shards:\n%s", unwanted, text)
	}
	out.Reset()
	if err := listGroups(context.Background(), st, true, &out, now); err != nil {
		t.Fatal(err)
	}
	var rows []groupRow
	if err := json.Unmarshal([]byte(out.String()), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("--groups --json: %v, %d rows, want 2\n%s", err, len(rows), out.String())
	}
	if r := rows[1]; r.Shards != 4 || r.Served || len(r.Owners) != 0 || len(r.Unheld) != 0 {
		t.Errorf("--groups --json's 4-shard group = %+v, want served false, no owners, no unheld shards: nobody serves it", r)
	}
	if r := rows[0]; r.Shards != 2 || !r.Served || fmt.Sprint(r.Unheld) != "[1]" {
		t.Errorf("--groups --json's 2-shard group = %+v, want served true and shard 1 unheld", r)
	}
}

// TestLeasesErrorsHideTheMongoPassword pins for the leases command what
// serve keeps: no fragment of the Mongo URI's password reaches an error,
// even when a bad escape makes the driver quote it.
func TestLeasesErrorsHideTheMongoPassword(t *testing.T) {
	const pw = "hunter2%zzpw"
	err := leases(t.Context(), []string{"--mongo-uri", "mongodb://admin:" + pw + "@127.0.0.1:1/"},
		func(string) string { return "" }, io.Discard, io.Discard, time.Now)
	hidesThePassword(t, err)
}

// TestLeasesRefusesABadDatabaseName pins that --mongo-db is checked before
// connecting, as serve checks it: a usage error naming the flag.
func TestLeasesRefusesABadDatabaseName(t *testing.T) {
	err := leases(t.Context(), []string{"--mongo-uri", "mongodb://127.0.0.1:1/", "--mongo-db", "prod.iterion"},
		func(string) string { return "" }, io.Discard, io.Discard, time.Now)
	var msg strings.Builder
	if code := exitCode(&msg, "leases", err); code != 2 || !strings.Contains(msg.String(), `--mongo-db "prod.iterion"`) {
		t.Errorf("leases --mongo-db prod.iterion: exit %d, %q; want exit 2 naming --mongo-db", code, msg.String())
	}
}

// TestLeasesRefusesAMongoURIItCannotUse pins that --mongo-uri is checked
// before connecting, as serve checks it: a URI of another scheme, or a
// mongodb:// URI the driver cannot parse, is a usage error naming the
// flag, the password hidden, not a failed connection (exit 1).
func TestLeasesRefusesAMongoURIItCannotUse(t *testing.T) {
	for _, c := range []struct{ uri, want string }{
		{"http://db:27017/", `--mongo-uri "http://db:27017/": want a mongodb:// or mongodb+srv:// URI`},
		{"mongodb://", `--mongo-uri "mongodb://": error parsing uri: must have at least 1 host`},
		{"mongodb://db:99999/", `--mongo-uri "mongodb://db:99999/": error parsing uri`},
		{"mongodb://admin:s3cret-pw@db/?serverSelectionTimeoutMS=soon", `--mongo-uri "mongodb://admin:xxxxx@db/?serverSelectionTimeoutMS=soon": error parsing uri`},
	} {
		err := leases(t.Context(), []string{"--mongo-uri", c.uri}, func(string) string { return "" }, io.Discard, io.Discard, time.Now)
		var msg strings.Builder
		if code := exitCode(&msg, "leases", err); code != 2 || !strings.Contains(msg.String(), c.want) || strings.Contains(msg.String(), "s3cret") {
			t.Errorf("leases --mongo-uri %s: exit %d, %q; want exit 2 and %q, no password", c.uri, code, msg.String(), c.want)
		}
	}
}

// TestLeasesReleaseRefusesABlankNameOrOwner pins that release's NAME and
// --owner are required as words: blank ones (spaces, as from an empty
// shell variable quoted) are a usage error naming them, found before
// connecting, not a release attempted from the owner "  ".
func TestLeasesReleaseRefusesABlankNameOrOwner(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"release", "merge-gate-sweeper", "--owner", "  "}, "--owner is required"},
		{[]string{"release", " ", "--owner", "replica-1"}, "the lease NAME is required"},
	} {
		// Port 1 answers nobody: a check that let the blank through would
		// fail connecting, exit 1.
		err := leases(t.Context(), append(c.args, "--mongo-uri", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"),
			func(string) string { return "" }, io.Discard, io.Discard, time.Now)
		var msg strings.Builder
		if code := exitCode(&msg, "leases", err); code != 2 || !strings.Contains(msg.String(), c.want) {
			t.Errorf("leases %q: exit %d, %q; want exit 2 saying %q", c.args, code, msg.String(), c.want)
		}
	}
}

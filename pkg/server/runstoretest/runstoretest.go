// Package runstoretest is the conformance suite for server.RunStore: any
// store, ours or a user's, proves itself with one line,
//
//	func TestConformance(t *testing.T) { runstoretest.Run(t, newStore) }
//
// Each case runs as a subtest on a fresh store and treats it as a black box.
package runstoretest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// Run runs every conformance case against a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) server.RunStore) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("rule: %s", c.rule)
			c.check(t, newStore(t))
		})
	}
}

// base is the suite's clock origin; it has sub-millisecond digits on
// purpose, so truncation shows.
var base = time.Date(2026, 9, 30, 9, 0, 0, 123456789, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// ms is t as stores keep it.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// newRun returns a valid run for pull n at head sha.
func newRun(repo string, n int, sha string) server.GateRun {
	return server.GateRun{
		ID: server.RunID("github.com", repo, n, sha), Host: "github.com", Repo: repo,
		Pull: n, HeadSHA: sha, Context: server.DefaultContext, Verdict: server.VerdictSuccess,
		Description: "review passed", TargetURL: "https://ci.example/runs/1",
	}
}

func put(t *testing.T, s server.RunStore, r server.GateRun, now time.Time) bool {
	t.Helper()
	created, err := s.Put(context.Background(), r, now)
	if err != nil {
		t.Fatalf("Put(%s): %v", r.ID, err)
	}
	return created
}

func ids(runs []server.GateRun) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = fmt.Sprintf("%s#%d@%s", r.Repo, r.Pull, r.HeadSHA)
	}
	return out
}

func sameIDs(got []server.GateRun, want ...server.GateRun) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			return false
		}
	}
	return true
}

var cases = []struct {
	name, rule string
	check      func(t *testing.T, s server.RunStore)
}{
	{"PutCreatesThenUpdates", "Put reports created for a new id, not for an existing one; an update keeps Created and takes the new verdict and Updated", func(t *testing.T, s server.RunStore) {
		r := newRun("acme/app", 12, "aaa")
		if !put(t, s, r, at(0)) {
			t.Errorf("first Put created = false, want true: a new id is created")
		}
		r.Verdict, r.Description = server.VerdictFailure, "changes requested"
		if put(t, s, r, at(time.Minute)) {
			t.Errorf("second Put created = true, want false: the same id is an update")
		}
		got, err := s.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !got.Created.Equal(ms(at(0))) || !got.Updated.Equal(ms(at(time.Minute))) {
			t.Errorf("got Created %v Updated %v, want %v and %v: an update keeps Created", got.Created, got.Updated, ms(at(0)), ms(at(time.Minute)))
		}
		if got.Verdict != server.VerdictFailure || got.Description != "changes requested" {
			t.Errorf("got verdict %q %q, want failure %q: an update takes the new verdict", got.Verdict, got.Description, "changes requested")
		}
	}},
	{"GetRoundTrips", "every field of a stored run reads back as stored, instants in UTC to the millisecond", func(t *testing.T, s server.RunStore) {
		r := newRun("acme/app", 7, "0123abcd")
		r.Context = "custom/ctx"
		put(t, s, r, at(0).In(time.FixedZone("x", 3600)))
		got, err := s.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		want := r
		want.Created, want.Updated = ms(at(0)), ms(at(0))
		if got != want {
			t.Errorf("got %+v, want %+v: a run reads back as stored", got, want)
		}
		if got.Updated.Location() != time.UTC {
			t.Errorf("got location %v, want UTC: instants are UTC", got.Updated.Location())
		}
	}},
	{"GetMissing", "Get of an unknown id is ErrNotFound", func(t *testing.T, s server.RunStore) {
		_, err := s.Get(context.Background(), "nope")
		if !errors.Is(err, server.ErrNotFound) {
			t.Errorf("got %v, want ErrNotFound: an unknown id is not found", err)
		}
	}},
	{"PutRefusesInvalid", "a run Validate refuses is ErrInvalid and nothing is written", func(t *testing.T, s server.RunStore) {
		for _, bad := range []func(*server.GateRun){
			func(r *server.GateRun) { r.Repo = "no-slash" },
			func(r *server.GateRun) { r.Pull = 0 },
			func(r *server.GateRun) { r.HeadSHA = "" },
			func(r *server.GateRun) { r.Verdict = "approved" },
			func(r *server.GateRun) { r.Host = "" },
		} {
			r := newRun("acme/app", 3, "bbb")
			bad(&r)
			if _, err := s.Put(context.Background(), r, at(0)); !errors.Is(err, server.ErrInvalid) {
				t.Errorf("Put(%+v) = %v, want ErrInvalid: invalid runs are refused", r, err)
			}
			if _, err := s.Get(context.Background(), r.ID); !errors.Is(err, server.ErrNotFound) {
				t.Errorf("Get after refused Put = %v, want ErrNotFound: nothing is written", err)
			}
		}
	}},
	{"UnsettledWindow", "Unsettled lists runs updated at or after since (inclusive), oldest first, and leaves settled runs out", func(t *testing.T, s server.RunStore) {
		old, edge, fresh, done := newRun("acme/app", 1, "a1"), newRun("acme/app", 2, "a2"), newRun("acme/app", 3, "a3"), newRun("acme/app", 4, "a4")
		put(t, s, old, at(0))
		put(t, s, edge, at(time.Hour))
		put(t, s, fresh, at(2*time.Hour))
		put(t, s, done, at(2*time.Hour))
		if err := s.Settle(context.Background(), done.ID); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		got, err := s.Unsettled(context.Background(), at(time.Hour), server.Cursor{}, 10)
		if err != nil {
			t.Fatalf("Unsettled: %v", err)
		}
		if !sameIDs(got, edge, fresh) {
			t.Errorf("got %v, want [#2 #3]: the window is inclusive and settled runs are left out", ids(got))
		}
	}},
	{"UnsettledPages", "paging by CursorAt visits every run once in (Updated, ID) order, ties on Updated broken by ID", func(t *testing.T, s server.RunStore) {
		var want []server.GateRun
		for i := range 7 {
			r := newRun("acme/app", 10+i, fmt.Sprintf("c%d", i))
			put(t, s, r, at(time.Duration(i/3)*time.Second)) // three runs share each instant
			r, _ = s.Get(context.Background(), r.ID)
			want = append(want, r)
		}
		var got []server.GateRun
		cur := server.Cursor{}
		for page := 0; page < 10; page++ {
			p, err := s.Unsettled(context.Background(), at(0), cur, 2)
			if err != nil {
				t.Fatalf("Unsettled: %v", err)
			}
			got = append(got, p...)
			if len(p) < 2 {
				break
			}
			cur = server.CursorAt(p[len(p)-1])
		}
		if len(got) != len(want) {
			t.Fatalf("got %d runs %v, want %d: paging visits every run once", len(got), ids(got), len(want))
		}
		for i := 1; i < len(got); i++ {
			if server.CursorAt(got[i]).Before(got[i-1]) || got[i].ID == got[i-1].ID {
				t.Errorf("run %d %v comes before run %d %v: listing order is (Updated, ID)", i, server.CursorAt(got[i]), i-1, server.CursorAt(got[i-1]))
			}
		}
	}},
	{"UnsettledRefusesBadLimit", "a limit under 1 is ErrInvalid", func(t *testing.T, s server.RunStore) {
		if _, err := s.Unsettled(context.Background(), at(0), server.Cursor{}, 0); !errors.Is(err, server.ErrInvalid) {
			t.Errorf("got %v, want ErrInvalid: limit must be at least 1", err)
		}
	}},
	{"SettleIsIdempotentAndPutUnsettles", "settling twice is fine; a later Put of the same run unsettles it", func(t *testing.T, s server.RunStore) {
		r := newRun("acme/app", 5, "d1")
		put(t, s, r, at(0))
		for range 2 {
			if err := s.Settle(context.Background(), r.ID); err != nil {
				t.Fatalf("Settle: %v, want nil: settling is idempotent", err)
			}
		}
		got, _ := s.Get(context.Background(), r.ID)
		if !got.Settled {
			t.Errorf("got Settled false, want true after Settle")
		}
		put(t, s, r, at(time.Minute))
		got, _ = s.Get(context.Background(), r.ID)
		if got.Settled {
			t.Errorf("got Settled true, want false: a new verdict unsettles the run")
		}
	}},
	{"SettleMissing", "settling an unknown id is ErrNotFound", func(t *testing.T, s server.RunStore) {
		if err := s.Settle(context.Background(), "nope"); !errors.Is(err, server.ErrNotFound) {
			t.Errorf("got %v, want ErrNotFound: an unknown id is not found", err)
		}
	}},
	{"ForPullAndForHead", "ForPull finds a pull's unsettled runs of any head; ForHead a head's in one repo; neither crosses repos or hosts", func(t *testing.T, s server.RunStore) {
		h1, h2, other, otherRepo := newRun("acme/app", 9, "e1"), newRun("acme/app", 9, "e2"), newRun("acme/app", 10, "e1"), newRun("acme/lib", 9, "e1")
		otherHost := newRun("acme/app", 9, "e1")
		otherHost.Host, otherHost.ID = "ghe.example", server.RunID("ghe.example", "acme/app", 9, "e1")
		for _, r := range []server.GateRun{h1, h2, other, otherRepo, otherHost} {
			put(t, s, r, at(0))
		}
		if err := s.Settle(context.Background(), h2.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.ForPull(context.Background(), "github.com", "acme/app", 9)
		if err != nil || !sameIDs(got, h1) {
			t.Errorf("ForPull = %v, %v, want [acme/app#9@e1]: settled runs and other pulls, repos and hosts are left out", ids(got), err)
		}
		got, err = s.ForHead(context.Background(), "github.com", "acme/app", "e1")
		want := []server.GateRun{h1, other}
		if want[0].ID > want[1].ID {
			want[0], want[1] = want[1], want[0]
		}
		if err != nil || !sameIDs(got, want...) {
			t.Errorf("ForHead = %v, %v, want #9@e1 and #10@e1 by id: one head, one repo, one host", ids(got), err)
		}
	}},
	{"ListFilters", "List selects by host, repo, pull and state; a zero field matches every run; settled runs are listed unless State leaves them out", func(t *testing.T, s server.RunStore) {
		a9, a9b, a10, lib9 := newRun("acme/app", 9, "g1"), newRun("acme/app", 9, "g2"), newRun("acme/app", 10, "g3"), newRun("acme/lib", 9, "g4")
		otherHost := newRun("acme/app", 9, "g5")
		otherHost.Host, otherHost.ID = "ghe.example", server.RunID("ghe.example", "acme/app", 9, "g5")
		for i, r := range []server.GateRun{a9, a9b, a10, lib9, otherHost} {
			put(t, s, r, at(time.Duration(i)*time.Second))
		}
		if err := s.Settle(context.Background(), a9b.ID); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			why  string
			q    server.RunQuery
			want []server.GateRun
		}{
			{"no filter: every run, settled included, by Updated", server.RunQuery{Limit: 10}, []server.GateRun{a9, a9b, a10, lib9, otherHost}},
			{"one host", server.RunQuery{Host: "github.com", Limit: 10}, []server.GateRun{a9, a9b, a10, lib9}},
			{"one repo, any host", server.RunQuery{Repo: "acme/app", Limit: 10}, []server.GateRun{a9, a9b, a10, otherHost}},
			{"one pull of one repo and host", server.RunQuery{Host: "github.com", Repo: "acme/app", Pull: 9, Limit: 10}, []server.GateRun{a9, a9b}},
			{"unsettled only", server.RunQuery{Host: "github.com", Repo: "acme/app", Pull: 9, State: server.RunsUnsettled, Limit: 10}, []server.GateRun{a9}},
			{"settled only", server.RunQuery{State: server.RunsSettled, Limit: 10}, []server.GateRun{a9b}},
			{"the limit bounds the page", server.RunQuery{Limit: 2}, []server.GateRun{a9, a9b}},
			{"the cursor starts the page after it", server.RunQuery{After: server.Cursor{Updated: ms(at(time.Second)), ID: a9b.ID}, Limit: 10}, []server.GateRun{a10, lib9, otherHost}},
		} {
			got, err := s.List(context.Background(), c.q)
			if err != nil || !sameIDs(got, c.want...) {
				t.Errorf("List(%+v) = %v, %v, want %v: %s", c.q, ids(got), err, ids(c.want), c.why)
			}
		}
	}},
	{"ListRefusesBadQuery", "a query Validate refuses (bad repo, negative pull, unknown state, limit under 1) is ErrInvalid", func(t *testing.T, s server.RunStore) {
		for _, q := range []server.RunQuery{
			{Repo: "app", Limit: 1}, {Pull: -1, Limit: 1}, {State: "open", Limit: 1}, {Limit: 0},
		} {
			if _, err := s.List(context.Background(), q); !errors.Is(err, server.ErrInvalid) {
				t.Errorf("List(%+v) = %v, want ErrInvalid naming the field", q, err)
			}
		}
	}},
	{"DoneContext", "a call on a done context fails and writes nothing", func(t *testing.T, s server.RunStore) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := newRun("acme/app", 1, "f1")
		if _, err := s.Put(ctx, r, at(0)); err == nil {
			t.Errorf("Put on a done context = nil, want an error")
		}
		if _, err := s.Get(context.Background(), r.ID); !errors.Is(err, server.ErrNotFound) {
			t.Errorf("Get after a Put on a done context = %v, want ErrNotFound: nothing is written", err)
		}
		if _, err := s.Unsettled(ctx, at(0), server.Cursor{}, 1); err == nil {
			t.Errorf("Unsettled on a done context = nil, want an error")
		}
	}},
}

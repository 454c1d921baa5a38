// Package gateruntest is the conformance suite for gaterun.Store: any
// store, ours or a user's, proves itself with one line,
//
//	func TestConformance(t *testing.T) { gateruntest.Run(t, newStore) }
//
// Each case runs as a subtest on a fresh store and treats it as a black box.
package gateruntest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/conformance"
	"iterion.dev/iterion/pkg/gaterun"
)

// Run runs every conformance case against a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) gaterun.Store) {
	t.Helper()
	conformance.Run(t, cases, newStore)
}

// base is the suite's clock origin; it has sub-millisecond digits on
// purpose, so truncation shows.
var base = time.Date(2026, 9, 30, 9, 0, 0, 123456789, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// ms is t as stores keep it.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// newRun returns a valid run for pull n at head sha.
func newRun(repo string, n int, sha string) gaterun.Run {
	return gaterun.Run{
		ID: gaterun.ID("github.com", repo, n, sha), Host: "github.com", Repo: repo,
		Pull: n, HeadSHA: sha, Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess,
		Description: "review passed", TargetURL: "https://ci.example/runs/1",
	}
}

func put(t *testing.T, s gaterun.Store, r gaterun.Run, now time.Time) bool {
	t.Helper()
	created, err := s.Put(context.Background(), r, now)
	if err != nil {
		t.Fatalf("Put(%s): %v", r.ID, err)
	}
	return created
}

// settle settles the run with id as a caller that read it now would: with
// its Reported.
func settle(t *testing.T, s gaterun.Store, id string) {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s) to settle it: %v", id, err)
	}
	if settled, err := s.Settle(context.Background(), id, r.Reported); err != nil || !settled {
		t.Fatalf("Settle(%s, its Reported) = %v, %v, want true", id, settled, err)
	}
}

func ids(runs []gaterun.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = fmt.Sprintf("%s#%d@%s", r.Repo, r.Pull, r.HeadSHA)
	}
	return out
}

func sameIDs(got []gaterun.Run, want ...gaterun.Run) bool {
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

var cases = []conformance.Case[gaterun.Store]{
	{Name: "PutCreatesThenUpdates", Rule: "Put reports created for a new id, not for an existing one; an update keeps Created and takes the new verdict, Updated and Reported", Check: func(t *testing.T, s gaterun.Store) {
		r := newRun("acme/app", 12, "aaa")
		if !put(t, s, r, at(0)) {
			t.Errorf("first Put created = false, want true: a new id is created")
		}
		r.Verdict, r.Description = gaterun.VerdictFailure, "changes requested"
		if put(t, s, r, at(time.Minute)) {
			t.Errorf("second Put created = true, want false: the same id is an update")
		}
		got, err := s.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !got.Created.Equal(ms(at(0))) || !got.Updated.Equal(ms(at(time.Minute))) || !got.Reported.Equal(ms(at(time.Minute))) {
			t.Errorf("got Created %v Updated %v Reported %v, want %v, %v and %v: an update keeps Created and reports its verdict now", got.Created, got.Updated, got.Reported, ms(at(0)), ms(at(time.Minute)), ms(at(time.Minute)))
		}
		if got.Verdict != gaterun.VerdictFailure || got.Description != "changes requested" {
			t.Errorf("got verdict %q %q, want failure %q: an update takes the new verdict", got.Verdict, got.Description, "changes requested")
		}
	}},
	{Name: "RacingFirstPutsCreateOnce", Rule: "Puts of one new run racing from several replicas store one run, none fails, and exactly one reports it created", Check: func(t *testing.T, s gaterun.Store) {
		r := newRun("acme/app", 14, "race")
		const n = 6
		created := make(chan bool, n)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c, err := s.Put(context.Background(), r, at(time.Duration(i)*time.Millisecond))
				created <- c
				errs <- err
			})
		}
		wg.Wait()
		close(created)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("a racing Put: %v, want nil: a first Put that loses the race is an update", err)
			}
		}
		count := 0
		for c := range created {
			if c {
				count++
			}
		}
		if count != 1 {
			t.Errorf("%d of %d racing Puts report created, want exactly 1", count, n)
		}
		if runs, err := s.ForPull(context.Background(), "github.com", "acme/app", 14); err != nil || len(runs) != 1 {
			t.Errorf("ForPull = %v, %v; want the one run", ids(runs), err)
		}
	}},
	{Name: "GetRoundTrips", Rule: "every field of a stored run reads back as stored, instants in UTC to the millisecond", Check: func(t *testing.T, s gaterun.Store) {
		r := newRun("acme/app", 7, "0123abcd")
		r.Context, r.Installation = "custom/ctx", 42
		put(t, s, r, at(0).In(time.FixedZone("x", 3600)))
		got, err := s.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		want := r
		want.Created, want.Updated, want.Reported = ms(at(0)), ms(at(0)), ms(at(0))
		if got != want {
			t.Errorf("got %+v, want %+v: a run reads back as stored", got, want)
		}
		if got.Updated.Location() != time.UTC {
			t.Errorf("got location %v, want UTC: instants are UTC", got.Updated.Location())
		}
	}},
	{Name: "GetMissing", Rule: "Get of an unknown id is ErrNotFound", Check: func(t *testing.T, s gaterun.Store) {
		_, err := s.Get(context.Background(), "nope")
		if !errors.Is(err, gaterun.ErrNotFound) {
			t.Errorf("got %v, want ErrNotFound: an unknown id is not found", err)
		}
	}},
	{Name: "PutRefusesInvalid", Rule: "a run Validate refuses is ErrInvalid and nothing is written", Check: func(t *testing.T, s gaterun.Store) {
		for _, bad := range []func(*gaterun.Run){
			func(r *gaterun.Run) { r.Repo = "no-slash" },
			func(r *gaterun.Run) { r.Pull = 0 },
			func(r *gaterun.Run) { r.HeadSHA = "" },
			func(r *gaterun.Run) { r.Verdict = "approved" },
			func(r *gaterun.Run) { r.Host = "" },
			func(r *gaterun.Run) { r.Installation = -1 },
		} {
			r := newRun("acme/app", 3, "bbb")
			bad(&r)
			if _, err := s.Put(context.Background(), r, at(0)); !errors.Is(err, gaterun.ErrInvalid) {
				t.Errorf("Put(%+v) = %v, want ErrInvalid: invalid runs are refused", r, err)
			}
			if _, err := s.Get(context.Background(), r.ID); !errors.Is(err, gaterun.ErrNotFound) {
				t.Errorf("Get after refused Put = %v, want ErrNotFound: nothing is written", err)
			}
		}
	}},
	{Name: "UnsettledWindow", Rule: "Unsettled lists runs updated at or after since (inclusive), oldest first, and leaves settled runs out", Check: func(t *testing.T, s gaterun.Store) {
		old, edge, fresh, done := newRun("acme/app", 1, "a1"), newRun("acme/app", 2, "a2"), newRun("acme/app", 3, "a3"), newRun("acme/app", 4, "a4")
		put(t, s, old, at(0))
		put(t, s, edge, at(time.Hour))
		put(t, s, fresh, at(2*time.Hour))
		put(t, s, done, at(2*time.Hour))
		settle(t, s, done.ID)
		got, err := s.Unsettled(context.Background(), at(time.Hour), gaterun.Cursor{}, 10)
		if err != nil {
			t.Fatalf("Unsettled: %v", err)
		}
		if !sameIDs(got, edge, fresh) {
			t.Errorf("got %v, want [#2 #3]: the window is inclusive and settled runs are left out", ids(got))
		}
	}},
	{Name: "UnsettledPages", Rule: "paging by CursorAt visits every run once in (Updated, ID) order, ties on Updated broken by ID", Check: func(t *testing.T, s gaterun.Store) {
		var want []gaterun.Run
		for i := range 7 {
			r := newRun("acme/app", 10+i, fmt.Sprintf("c%d", i))
			put(t, s, r, at(time.Duration(i/3)*time.Second)) // three runs share each instant
			r, _ = s.Get(context.Background(), r.ID)
			want = append(want, r)
		}
		var got []gaterun.Run
		cur := gaterun.Cursor{}
		for page := 0; page < 10; page++ {
			p, err := s.Unsettled(context.Background(), at(0), cur, 2)
			if err != nil {
				t.Fatalf("Unsettled: %v", err)
			}
			got = append(got, p...)
			if len(p) < 2 {
				break
			}
			cur = gaterun.CursorAt(p[len(p)-1])
		}
		if len(got) != len(want) {
			t.Fatalf("got %d runs %v, want %d: paging visits every run once", len(got), ids(got), len(want))
		}
		for i := 1; i < len(got); i++ {
			if gaterun.CursorAt(got[i]).Before(got[i-1]) || got[i].ID == got[i-1].ID {
				t.Errorf("run %d %v comes before run %d %v: listing order is (Updated, ID)", i, gaterun.CursorAt(got[i]), i-1, gaterun.CursorAt(got[i-1]))
			}
		}
	}},
	{Name: "CursorIsTakenToTheMillisecond", Rule: "a cursor's instant is taken to the millisecond, as stores keep instants: a cursor within a millisecond resumes at its start, so the runs of that millisecond after its ID are listed, by Unsettled, UnsettledIn, UnsettledAmong and List alike", Check: func(t *testing.T, s gaterun.Store) {
		ctx := context.Background()
		var runs []gaterun.Run
		for i := range 2 {
			r := newRun("acme/app", 30+i, fmt.Sprintf("e%d", i))
			put(t, s, r, at(0)) // one instant, to the millisecond
			r, _ = s.Get(ctx, r.ID)
			runs = append(runs, r)
		}
		slices.SortFunc(runs, func(a, b gaterun.Run) int { return cmp.Compare(a.ID, b.ID) })
		after := gaterun.CursorAt(runs[0])
		after.Updated = after.Updated.Add(400 * time.Microsecond) // within the millisecond
		if !after.Before(runs[1]) {
			t.Errorf("Cursor%+v.Before(%v) = false, want true: a cursor within a millisecond is at its start", after, gaterun.CursorAt(runs[1]))
		}
		for _, c := range []struct {
			what string
			list func() ([]gaterun.Run, error)
		}{
			{"Unsettled", func() ([]gaterun.Run, error) { return s.Unsettled(ctx, at(0), after, 10) }},
			{"UnsettledIn", func() ([]gaterun.Run, error) { return s.UnsettledIn(ctx, 0, at(0), after, 10) }},
			{"UnsettledAmong", func() ([]gaterun.Run, error) { return s.UnsettledAmong(ctx, []int64{0}, at(0), after, 10) }},
			{"List", func() ([]gaterun.Run, error) { return s.List(ctx, gaterun.Query{After: after, Limit: 10}) }},
		} {
			got, err := c.list()
			if err != nil || !sameIDs(got, runs[1]) {
				t.Errorf("%s after %+v = %v, %v; want %v: a cursor within a millisecond resumes at its start", c.what, after, ids(got), err, ids(runs[1:]))
			}
		}
	}},
	{Name: "UnsettledRefusesBadLimit", Rule: "a limit under 1 is ErrInvalid", Check: func(t *testing.T, s gaterun.Store) {
		if _, err := s.Unsettled(context.Background(), at(0), gaterun.Cursor{}, 0); !errors.Is(err, gaterun.ErrInvalid) {
			t.Errorf("got %v, want ErrInvalid: limit must be at least 1", err)
		}
	}},
	{Name: "UnsettledInOneInstallation", Rule: "UnsettledIn lists one installation's unsettled runs alone, in listing order and pages like Unsettled; 0 lists the runs of none; a Put naming another installation moves the run", Check: func(t *testing.T, s gaterun.Store) {
		var one []gaterun.Run
		for i := range 5 {
			r := newRun(fmt.Sprintf("org-1/repo-%d", i%2), 20+i, "i1")
			r.Installation = 1
			put(t, s, r, at(time.Duration(i/2)*time.Second)) // two runs share each instant
			r, _ = s.Get(context.Background(), r.ID)
			one = append(one, r)
		}
		two, none, settled := newRun("org-2/repo-1", 1, "i2"), newRun("acme/app", 1, "i0"), newRun("org-1/repo-9", 9, "i1s")
		two.Installation, settled.Installation = 2, 1
		for _, r := range []gaterun.Run{two, none, settled} {
			put(t, s, r, at(0))
		}
		settle(t, s, settled.ID)
		var got []gaterun.Run
		cur := gaterun.Cursor{}
		for page := 0; page < 10; page++ {
			p, err := s.UnsettledIn(context.Background(), 1, at(0), cur, 2)
			if err != nil {
				t.Fatalf("UnsettledIn: %v", err)
			}
			got = append(got, p...)
			if len(p) < 2 {
				break
			}
			cur = gaterun.CursorAt(p[len(p)-1])
		}
		slices.SortFunc(one, func(a, b gaterun.Run) int {
			return cmp.Or(a.Updated.Compare(b.Updated), cmp.Compare(a.ID, b.ID))
		})
		if !sameIDs(got, one...) {
			t.Errorf("UnsettledIn(1) paged by 2 = %v, want %v: installation 1's unsettled runs alone, in (Updated, ID) order", ids(got), ids(one))
		}
		if got, err := s.UnsettledIn(context.Background(), 0, at(0), gaterun.Cursor{}, 10); err != nil || !sameIDs(got, none) {
			t.Errorf("UnsettledIn(0) = %v, %v, want [acme/app#1@i0]: 0 lists the runs of no installation", ids(got), err)
		}
		two.Installation = 3
		put(t, s, two, at(time.Minute))
		if got, err := s.UnsettledIn(context.Background(), 2, at(0), gaterun.Cursor{}, 10); err != nil || len(got) != 0 {
			t.Errorf("UnsettledIn(2) after a Put naming installation 3 = %v, %v, want none: the run moved", ids(got), err)
		}
		if got, err := s.UnsettledIn(context.Background(), 3, at(0), gaterun.Cursor{}, 10); err != nil || !sameIDs(got, two) {
			t.Errorf("UnsettledIn(3) = %v, %v, want [org-2/repo-1#1@i2]: a Put replaces the installation", ids(got), err)
		}
		if _, err := s.UnsettledIn(context.Background(), 1, at(0), gaterun.Cursor{}, 0); !errors.Is(err, gaterun.ErrInvalid) {
			t.Errorf("UnsettledIn with limit 0 = %v, want ErrInvalid: limit must be at least 1", err)
		}
	}},
	{Name: "UnsettledAmongInstallations", Rule: "UnsettledAmong lists the unsettled runs of a set of installations alone, in listing order and pages like Unsettled; 0 in the set names the runs of none; an empty set lists none", Check: func(t *testing.T, s gaterun.Store) {
		var want []gaterun.Run
		for i := range 6 {
			r := newRun(fmt.Sprintf("org-%d/repo-1", i%3), 30+i, "am")
			r.Installation = int64(i % 3)                    // 0, 1, 2
			put(t, s, r, at(time.Duration(i/2)*time.Second)) // two runs share each instant
			if r.Installation != 1 {
				r, _ = s.Get(context.Background(), r.ID)
				want = append(want, r)
			}
		}
		settled := newRun("org-2/repo-1", 99, "am")
		settled.Installation = 2
		put(t, s, settled, at(0))
		settle(t, s, settled.ID)
		var got []gaterun.Run
		cur := gaterun.Cursor{}
		for page := 0; page < 10; page++ {
			p, err := s.UnsettledAmong(context.Background(), []int64{2, 0, 7}, at(0), cur, 2)
			if err != nil {
				t.Fatalf("UnsettledAmong: %v", err)
			}
			got = append(got, p...)
			if len(p) < 2 {
				break
			}
			cur = gaterun.CursorAt(p[len(p)-1])
		}
		slices.SortFunc(want, func(a, b gaterun.Run) int {
			return cmp.Or(a.Updated.Compare(b.Updated), cmp.Compare(a.ID, b.ID))
		})
		if !sameIDs(got, want...) {
			t.Errorf("UnsettledAmong({2, 0, 7}) paged by 2 = %v, want %v: the unsettled runs of installations 2 and none, in (Updated, ID) order", ids(got), ids(want))
		}
		if got, err := s.UnsettledAmong(context.Background(), []int64{2}, at(2*time.Second), gaterun.Cursor{}, 10); err != nil || !sameIDs(got, want[len(want)-1]) {
			t.Errorf("UnsettledAmong({2}) since 2s = %v, %v, want [%s]: since bounds it as Unsettled's", ids(got), err, want[len(want)-1].ID)
		}
		if got, err := s.UnsettledAmong(context.Background(), nil, at(0), gaterun.Cursor{}, 10); err != nil || len(got) != 0 {
			t.Errorf("UnsettledAmong(none) = %v, %v, want none", ids(got), err)
		}
		if _, err := s.UnsettledAmong(context.Background(), []int64{1}, at(0), gaterun.Cursor{}, 0); !errors.Is(err, gaterun.ErrInvalid) {
			t.Errorf("UnsettledAmong with limit 0 = %v, want ErrInvalid: limit must be at least 1", err)
		}
	}},
	{Name: "SettleIsIdempotentAndPutUnsettles", Rule: "settling twice is fine; a later Put of the same run unsettles it, even of a copy read while it was settled", Check: func(t *testing.T, s gaterun.Store) {
		r := newRun("acme/app", 5, "d1")
		put(t, s, r, at(0))
		for range 2 {
			if settled, err := s.Settle(context.Background(), r.ID, at(0)); err != nil || !settled {
				t.Fatalf("Settle = %v, %v, want true, nil: settling is idempotent", settled, err)
			}
		}
		got, _ := s.Get(context.Background(), r.ID)
		if !got.Settled {
			t.Errorf("got Settled false, want true after Settle")
		}
		put(t, s, got, at(time.Minute)) // the copy read back: Settled true
		got, _ = s.Get(context.Background(), r.ID)
		if got.Settled {
			t.Errorf("got Settled true, want false: a new verdict unsettles the run, whatever the run put says")
		}
	}},
	{Name: "SettleMissing", Rule: "settling an unknown id is ErrNotFound", Check: func(t *testing.T, s gaterun.Store) {
		if _, err := s.Settle(context.Background(), "nope", at(0)); !errors.Is(err, gaterun.ErrNotFound) {
			t.Errorf("got %v, want ErrNotFound: an unknown id is not found", err)
		}
	}},
	{Name: "SettleKeepsALaterReport", Rule: "Settle settles the run only while its verdict is the one reported at the instant given (a move between does not stop it) and is idempotent; a verdict reported since stays unsettled and reports false; an unknown id is ErrNotFound", Check: func(t *testing.T, s gaterun.Store) {
		ctx := context.Background()
		r := newRun("acme/app", 5, "s1")
		r.Installation = 3
		put(t, s, r, at(0))
		read, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		r.Verdict = gaterun.VerdictFailure
		put(t, s, r, at(time.Minute)) // reported after the caller read the run
		if settled, err := s.Settle(ctx, r.ID, read.Reported); err != nil || settled {
			t.Errorf("Settle(the earlier report) = %v, %v, want false, nil: a verdict reported since is news the caller did not decide on", settled, err)
		}
		if got, _ := s.Get(ctx, r.ID); got.Settled || got.Verdict != gaterun.VerdictFailure {
			t.Errorf("after a refused Settle: Settled %v, verdict %q; want false and failure: the later report stands", got.Settled, got.Verdict)
		}
		read, _ = s.Get(ctx, r.ID)
		if moved, err := s.Move(ctx, r.ID, 3, 4, at(2*time.Minute)); err != nil || !moved {
			t.Fatalf("Move: %v, %v", moved, err)
		}
		for i := range 2 {
			if settled, err := s.Settle(ctx, r.ID, read.Reported.Add(500*time.Microsecond)); err != nil || !settled {
				t.Errorf("Settle(the last report, to the millisecond), call %d = %v, %v, want true, nil: a move reports no verdict, and settling is idempotent", i+1, settled, err)
			}
		}
		if got, _ := s.Get(ctx, r.ID); !got.Settled {
			t.Errorf("got Settled false, want true after Settle of the last report")
		}
		if _, err := s.Settle(ctx, "nope", at(0)); !errors.Is(err, gaterun.ErrNotFound) {
			t.Errorf("Settle of an unknown id = %v, want ErrNotFound", err)
		}
	}},
	{Name: "MoveChangesOnlyTheInstallation", Rule: "Move gives an unsettled run under from installation to and Updated now, and keeps every other field, Reported and a verdict put since the caller read the run included; a run settled, gone or under another installation is left as it is; to under 1 is ErrInvalid", Check: func(t *testing.T, s gaterun.Store) {
		ctx := context.Background()
		r := newRun("acme/app", 6, "m1")
		r.Installation = 1
		put(t, s, r, at(0))
		listed, _ := s.Get(ctx, r.ID) // what a mover reads
		newer := r
		newer.Verdict, newer.Description = gaterun.VerdictFailure, "changes requested"
		put(t, s, newer, at(time.Second)) // a verdict reported between the read and the move
		if moved, err := s.Move(ctx, r.ID, listed.Installation, 2, at(time.Minute)); err != nil || !moved {
			t.Fatalf("Move(1 to 2) = %v, %v, want true: an unsettled run under installation 1 moves", moved, err)
		}
		want := newer
		want.Installation, want.Created, want.Updated, want.Reported = 2, ms(at(0)), ms(at(time.Minute)), ms(at(time.Second))
		if got, err := s.Get(ctx, r.ID); err != nil || got != want {
			t.Errorf("after Move: %+v, %v, want %+v: the installation and Updated change, and the verdict put since the read, and when it was reported, stay", got, err, want)
		}
		if moved, err := s.Move(ctx, r.ID, 1, 3, at(2*time.Minute)); err != nil || moved {
			t.Errorf("Move(1 to 3) of a run under 2 = %v, %v, want false: a run under another installation stays", moved, err)
		}
		settle(t, s, r.ID)
		if moved, err := s.Move(ctx, r.ID, 2, 3, at(3*time.Minute)); err != nil || moved {
			t.Errorf("Move of a settled run = %v, %v, want false: a settled run stays settled where it is", moved, err)
		}
		want.Settled = true
		if got, err := s.Get(ctx, r.ID); err != nil || got != want {
			t.Errorf("after the refused moves: %+v, %v, want %+v: nothing changes", got, err, want)
		}
		none := newRun("acme/app", 7, "m2") // stored without an installation
		put(t, s, none, at(0))
		if moved, err := s.Move(ctx, none.ID, 0, 4, at(time.Minute)); err != nil || !moved {
			t.Errorf("Move(0 to 4) = %v, %v, want true: from 0 names the runs stored without an installation", moved, err)
		}
		if got, err := s.UnsettledIn(ctx, 4, at(0), gaterun.Cursor{}, 10); err != nil || !sameIDs(got, none) {
			t.Errorf("UnsettledIn(4) = %v, %v, want the moved run", ids(got), err)
		}
		if moved, err := s.Move(ctx, "nope", 0, 1, at(0)); err != nil || moved {
			t.Errorf("Move of an unknown id = %v, %v, want false and no error: a gone run is left as it is", moved, err)
		}
		if _, err := s.Move(ctx, none.ID, 4, 0, at(0)); !errors.Is(err, gaterun.ErrInvalid) {
			t.Errorf("Move to installation 0 = %v, want ErrInvalid: a run moves to an installation", err)
		}
	}},
	{Name: "ForPullAndForHead", Rule: "ForPull finds a pull's unsettled runs of any head; ForHead a head's in one repo; neither crosses repos or hosts", Check: func(t *testing.T, s gaterun.Store) {
		h1, h2, other, otherRepo := newRun("acme/app", 9, "e1"), newRun("acme/app", 9, "e2"), newRun("acme/app", 10, "e1"), newRun("acme/lib", 9, "e1")
		otherHost := newRun("acme/app", 9, "e1")
		otherHost.Host, otherHost.ID = "ghe.example", gaterun.ID("ghe.example", "acme/app", 9, "e1")
		for _, r := range []gaterun.Run{h1, h2, other, otherRepo, otherHost} {
			put(t, s, r, at(0))
		}
		settle(t, s, h2.ID)
		got, err := s.ForPull(context.Background(), "github.com", "acme/app", 9)
		if err != nil || !sameIDs(got, h1) {
			t.Errorf("ForPull = %v, %v, want [acme/app#9@e1]: settled runs and other pulls, repos and hosts are left out", ids(got), err)
		}
		got, err = s.ForHead(context.Background(), "github.com", "acme/app", "e1")
		want := []gaterun.Run{h1, other}
		if want[0].ID > want[1].ID {
			want[0], want[1] = want[1], want[0]
		}
		if err != nil || !sameIDs(got, want...) {
			t.Errorf("ForHead = %v, %v, want #9@e1 and #10@e1 by id: one head, one repo, one host", ids(got), err)
		}
	}},
	{Name: "NamesCompareWithoutCase", Rule: "owner and repository names compare as GitHub compares them, without regard to case: ID, ForPull, ForHead and List find a run under any spelling, and the Repo first given is kept for display", Check: func(t *testing.T, s gaterun.Store) {
		first := newRun("Codertocat/Hello-World", 7, "c1")
		if gaterun.ID("github.com", "codertocat/hello-world", 7, "c1") != first.ID {
			t.Fatalf("ID differs between spellings of one repository: names differing in case are one repository on GitHub")
		}
		other := newRun("codertocat/hello-world-2", 7, "c1")
		put(t, s, first, at(0))
		put(t, s, other, at(0))
		again := newRun("CODERTOCAT/hello-world", 7, "c1")
		again.Verdict = gaterun.VerdictFailure
		if put(t, s, again, at(time.Second)) {
			t.Errorf("Put under another spelling created a run: it is the same run")
		}
		got, err := s.Get(context.Background(), first.ID)
		if err != nil || got.Repo != "Codertocat/Hello-World" || got.Verdict != gaterun.VerdictFailure {
			t.Errorf("Get = %+v, %v, want repo Codertocat/Hello-World (as first given) with the later verdict failure", got, err)
		}
		for _, spelling := range []string{"codertocat/hello-world", "CODERTOCAT/HELLO-WORLD", "Codertocat/Hello-World"} {
			runs, err := s.ForPull(context.Background(), "github.com", spelling, 7)
			if err != nil || !sameIDs(runs, first) {
				t.Errorf("ForPull(%s) = %v, %v, want the one run of Codertocat/Hello-World#7", spelling, ids(runs), err)
			}
			runs, err = s.ForHead(context.Background(), "github.com", spelling, "c1")
			if err != nil || !sameIDs(runs, first) {
				t.Errorf("ForHead(%s) = %v, %v, want the one run of Codertocat/Hello-World@c1", spelling, ids(runs), err)
			}
			runs, err = s.List(context.Background(), gaterun.Query{Repo: spelling, Limit: 10})
			if err != nil || !sameIDs(runs, first) {
				t.Errorf("List(repo %s) = %v, %v, want the one run of Codertocat/Hello-World", spelling, ids(runs), err)
			}
		}
	}},
	{Name: "ListFilters", Rule: "List selects by host, repo, pull, installation and state; a zero field matches every run; settled runs are listed unless State leaves them out", Check: func(t *testing.T, s gaterun.Store) {
		a9, a9b, a10, lib9 := newRun("acme/app", 9, "g1"), newRun("acme/app", 9, "g2"), newRun("acme/app", 10, "g3"), newRun("acme/lib", 9, "g4")
		otherHost := newRun("acme/app", 9, "g5")
		otherHost.Host, otherHost.ID = "ghe.example", gaterun.ID("ghe.example", "acme/app", 9, "g5")
		a10.Installation, lib9.Installation = 7, 7
		for i, r := range []gaterun.Run{a9, a9b, a10, lib9, otherHost} {
			put(t, s, r, at(time.Duration(i)*time.Second))
		}
		settle(t, s, a9b.ID)
		for _, c := range []struct {
			why  string
			q    gaterun.Query
			want []gaterun.Run
		}{
			{"no filter: every run, settled included, by Updated", gaterun.Query{Limit: 10}, []gaterun.Run{a9, a9b, a10, lib9, otherHost}},
			{"one host", gaterun.Query{Host: "github.com", Limit: 10}, []gaterun.Run{a9, a9b, a10, lib9}},
			{"one repo, any host", gaterun.Query{Repo: "acme/app", Limit: 10}, []gaterun.Run{a9, a9b, a10, otherHost}},
			{"one pull of one repo and host", gaterun.Query{Host: "github.com", Repo: "acme/app", Pull: 9, Limit: 10}, []gaterun.Run{a9, a9b}},
			{"unsettled only", gaterun.Query{Host: "github.com", Repo: "acme/app", Pull: 9, State: gaterun.StateUnsettled, Limit: 10}, []gaterun.Run{a9}},
			{"settled only", gaterun.Query{State: gaterun.StateSettled, Limit: 10}, []gaterun.Run{a9b}},
			{"one installation", gaterun.Query{Installation: 7, Limit: 10}, []gaterun.Run{a10, lib9}},
			{"the limit bounds the page", gaterun.Query{Limit: 2}, []gaterun.Run{a9, a9b}},
			{"the cursor starts the page after it", gaterun.Query{After: gaterun.Cursor{Updated: ms(at(time.Second)), ID: a9b.ID}, Limit: 10}, []gaterun.Run{a10, lib9, otherHost}},
		} {
			got, err := s.List(context.Background(), c.q)
			if err != nil || !sameIDs(got, c.want...) {
				t.Errorf("List(%+v) = %v, %v, want %v: %s", c.q, ids(got), err, ids(c.want), c.why)
			}
		}
	}},
	{Name: "ListRefusesBadQuery", Rule: "a query Validate refuses (bad repo, negative pull or installation, unknown state, limit under 1) is ErrInvalid", Check: func(t *testing.T, s gaterun.Store) {
		for _, q := range []gaterun.Query{
			{Repo: "app", Limit: 1}, {Pull: -1, Limit: 1}, {State: "open", Limit: 1}, {Limit: 0}, {Installation: -1, Limit: 1},
		} {
			if _, err := s.List(context.Background(), q); !errors.Is(err, gaterun.ErrInvalid) {
				t.Errorf("List(%+v) = %v, want ErrInvalid naming the field", q, err)
			}
		}
	}},
	{Name: "DoneContext", Rule: "a call on a done context fails and writes nothing", Check: func(t *testing.T, s gaterun.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := newRun("acme/app", 1, "f1")
		if _, err := s.Put(ctx, r, at(0)); err == nil {
			t.Errorf("Put on a done context = nil, want an error")
		}
		if _, err := s.Get(context.Background(), r.ID); !errors.Is(err, gaterun.ErrNotFound) {
			t.Errorf("Get after a Put on a done context = %v, want ErrNotFound: nothing is written", err)
		}
		if _, err := s.Unsettled(ctx, at(0), gaterun.Cursor{}, 1); err == nil {
			t.Errorf("Unsettled on a done context = nil, want an error")
		}
		put(t, s, r, at(0))
		if _, err := s.Move(ctx, r.ID, 0, 1, at(time.Minute)); err == nil {
			t.Errorf("Move on a done context = nil, want an error")
		}
		if got, err := s.Get(context.Background(), r.ID); err != nil || got.Installation != 0 {
			t.Errorf("Get after a Move on a done context = %+v, %v, want installation 0: nothing is written", got, err)
		}
	}},
}

package gaterun_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
)

// TestModelMongoRunStoreMatchesMemory drives random sequences of every
// Store call over a few runs (names in either case, installations, settled
// or not) and instants (around millisecond boundaries, mostly forward,
// sometimes backward), cursors included, against MemoryStore and MongoStore
// side by side, and fails at the first answer where the twins differ: the
// runs, the bool, and the error's kind by errors.Is. A rule only one twin
// keeps shows here first; the conformance suite then names it.
func TestModelMongoRunStoreMatchesMemory(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	var (
		steps = []time.Duration{0, time.Nanosecond, 400 * time.Microsecond, time.Millisecond - time.Nanosecond,
			time.Millisecond, time.Millisecond, 3 * time.Millisecond, -time.Millisecond}
		repos    = []string{"acme/app", "Acme/App", "acme/lib"}
		pulls    = []int{1, 2}
		shas     = []string{"aaa", "bbb"}
		verdicts = []gaterun.Verdict{gaterun.VerdictSuccess, gaterun.VerdictFailure, gaterun.VerdictPending, "bogus"}
		insts    = []int64{0, 1, 2, -1}
		states   = []gaterun.State{gaterun.StateAll, gaterun.StateUnsettled, gaterun.StateSettled}
		ops      = []string{"put", "put", "put", "get", "settle", "settle", "move", "unsettled", "unsettledIn",
			"unsettledAmong", "forPull", "forHead", "list", "list"}
	)
	rapid.Check(t, func(rt *rapid.T) {
		if err := db.Collection(gaterun.Collection).Drop(ctx); err != nil {
			rt.Fatalf("drop %s: %v", gaterun.Collection, err)
		}
		mongoStore, err := gaterun.NewMongoStore(ctx, db)
		if err != nil {
			rt.Fatalf("NewMongoStore: %v", err)
		}
		stores := [2]gaterun.Store{gaterun.NewMemoryStore(), mongoStore}
		now := t0
		drawRun := func() gaterun.Run {
			repo, pull, sha := rapid.SampledFrom(repos).Draw(rt, "repo"), rapid.SampledFrom(pulls).Draw(rt, "pull"), rapid.SampledFrom(shas).Draw(rt, "sha")
			return gaterun.Run{ID: gaterun.ID("github.com", repo, pull, sha), Host: "github.com", Repo: repo, Pull: pull, HeadSHA: sha,
				Context: gaterun.DefaultContext, Verdict: rapid.SampledFrom(verdicts).Draw(rt, "verdict"),
				Installation: rapid.SampledFrom(insts).Draw(rt, "installation")}
		}
		// drawAt is an instant near the calls' own, to the nanosecond.
		drawAt := func(label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(-1, 12).Draw(rt, label)) * 500 * time.Microsecond)
		}
		drawCursor := func() gaterun.Cursor {
			if rapid.Bool().Draw(rt, "zero cursor") {
				return gaterun.Cursor{}
			}
			return gaterun.Cursor{Updated: drawAt("cursor at"), ID: drawRun().ID}
		}
		for i := range rapid.IntRange(1, 25).Draw(rt, "calls") {
			now = now.Add(rapid.SampledFrom(steps).Draw(rt, "step"))
			op := rapid.SampledFrom(ops).Draw(rt, "op")
			var call string
			var answers [2]string
			var errs [2]error
			switch op {
			case "put":
				r := drawRun()
				call = fmt.Sprintf("Put(%s#%d@%s %s inst %d, t0%+v)", r.Repo, r.Pull, r.HeadSHA, r.Verdict, r.Installation, now.Sub(t0))
				for j, s := range stores {
					created, err := s.Put(ctx, r, now)
					answers[j], errs[j] = fmt.Sprint(created), err
				}
			case "get", "settle":
				id := drawRun().ID
				at := drawAt("reported")
				if r, err := stores[0].Get(ctx, id); op == "settle" && err == nil && rapid.Bool().Draw(rt, "settle as read") {
					// A caller settles with the Reported it read, give or
					// take what the millisecond hides.
					at = r.Reported.Add(time.Duration(rapid.IntRange(0, 999).Draw(rt, "µs")) * time.Microsecond)
				}
				call = fmt.Sprintf("%s(%s, t0%+v)", op, id, at.Sub(t0))
				for j, s := range stores {
					if op == "get" {
						r, err := s.Get(ctx, id)
						answers[j], errs[j] = fmt.Sprintf("%+v", r), err
						continue
					}
					ok, err := s.Settle(ctx, id, at)
					answers[j], errs[j] = fmt.Sprint(ok), err
				}
			case "move":
				id := drawRun().ID
				from, to := rapid.SampledFrom(insts).Draw(rt, "from"), rapid.SampledFrom(insts).Draw(rt, "to")
				call = fmt.Sprintf("Move(%s, %d, %d, t0%+v)", id, from, to, now.Sub(t0))
				for j, s := range stores {
					moved, err := s.Move(ctx, id, from, to, now)
					answers[j], errs[j] = fmt.Sprint(moved), err
				}
			default:
				since, after, limit := drawAt("since"), drawCursor(), rapid.IntRange(0, 3).Draw(rt, "limit")
				r := drawRun()
				q := gaterun.Query{After: after, Limit: limit, State: rapid.SampledFrom(states).Draw(rt, "state")}
				if rapid.Bool().Draw(rt, "by repo") {
					q.Host, q.Repo = r.Host, r.Repo
					if rapid.Bool().Draw(rt, "by pull") {
						q.Pull = r.Pull
					}
				}
				if rapid.Bool().Draw(rt, "by installation") {
					q.Installation = r.Installation
				}
				call = fmt.Sprintf("%s(since t0%+v, after %+v, limit %d, run %s#%d@%s inst %d, query %+v)",
					op, since.Sub(t0), after, limit, r.Repo, r.Pull, r.HeadSHA, r.Installation, q)
				for j, s := range stores {
					var runs []gaterun.Run
					switch op {
					case "unsettled":
						runs, errs[j] = s.Unsettled(ctx, since, after, limit)
					case "unsettledIn":
						runs, errs[j] = s.UnsettledIn(ctx, r.Installation, since, after, limit)
					case "unsettledAmong":
						runs, errs[j] = s.UnsettledAmong(ctx, []int64{r.Installation, 2}, since, after, limit)
					case "forPull":
						runs, errs[j] = s.ForPull(ctx, r.Host, r.Repo, r.Pull)
					case "forHead":
						runs, errs[j] = s.ForHead(ctx, r.Host, r.Repo, r.HeadSHA)
					case "list":
						runs, errs[j] = s.List(ctx, q)
					}
					answers[j] = fmt.Sprintf("%+v", runs)
				}
			}
			if answers[0] != answers[1] || errorKind(errs[0]) != errorKind(errs[1]) {
				rt.Fatalf("call %d, %s:\nMongoStore answered %s, %v;\nMemoryStore %s, %v:\nthe twins answer alike",
					i, call, answers[1], errs[1], answers[0], errs[0])
			}
			if k := errorKind(errs[0]); k == "unexpected" {
				rt.Fatalf("call %d, %s: error %v, want nil, ErrInvalid or ErrNotFound", i, call, errs[0])
			}
		}
	})
}

// errorKind classifies an error the way a caller of a Store may: by
// errors.Is.
func errorKind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, gaterun.ErrInvalid):
		return "invalid"
	case errors.Is(err, gaterun.ErrNotFound):
		return "not found"
	}
	return "unexpected"
}

package server_test

import (
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/server"
)

// concurrencyRun is what one configuration of
// TestSweepConcurrencyShortensAPassWithinItsBudget measured.
type concurrencyRun struct {
	meanDuty, maxDuty float64 // pass ÷ interval
	done              int     // passes that checked every run
	mostInFlight      int
	maxMinute         float64 // the simulator's GraphQL seconds in its busiest minute
	queries           int64
}

// sweepConcurrently sweeps n open runs for passes intervals of a minute
// with conc batches in flight at once and time share share, against the
// simulator with GitHub's latency model (seed 1), checking each pass is
// complete (none failed) and no request is refused.
func sweepConcurrently(t *testing.T, n, passes, conc int, share float64) concurrencyRun {
	var got concurrencyRun
	synctest.Test(t, func(t *testing.T) {
		lat := forgesim.GitHubLatency()
		lat.Seed = 1
		sim := forgesim.New(forgesim.WithLatency(lat))
		_, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		fc, queries, stopPipe := queriesInFlight(t, sim)
		defer stopPipe()
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass,
			Concurrency: conc, TimeShare: share})
		ps := sweepFor(sw, rec, time.Duration(passes)*time.Minute+59*time.Second)
		if len(ps) != passes {
			t.Fatalf("got %d passes in %d intervals, want %d", len(ps), passes, passes)
		}
		for i, p := range ps {
			duty := rec.took[i].Seconds() / 60
			got.meanDuty += duty / float64(passes)
			got.maxDuty = max(got.maxDuty, duty)
			if !p.Complete {
				t.Errorf("concurrency %d, pass %d: not complete, want complete", conc, p.Pass)
			}
			if p.ShallowDone {
				got.done++
			}
		}
		for _, rc := range sim.Stats().Requests {
			if rc.Status == http.StatusForbidden || rc.Status == http.StatusTooManyRequests {
				t.Errorf("simulator answered %d %s %d times, want no refusal", rc.Status, rc.Route, rc.Count)
			}
		}
		for _, sec := range graphqlMinutes(sim) {
			got.maxMinute = max(got.maxMinute, sec)
		}
		got.mostInFlight = queries.Most()
		got.queries = sim.Requests(forgesim.Filter{Route: "POST /graphql"})
	})
	return got
}

// queriesInFlight is a forge client of sim whose GraphQL queries in
// flight at once are counted, with sim's counts reset, and the stop of
// its pipe to sim.
func queriesInFlight(t *testing.T, sim *forgesim.Sim) (*forge.Client, *forgetest.InFlight, func()) {
	t.Helper()
	pipe, stop := serveSimOnPipe(sim)
	queries := &forgetest.InFlight{Next: pipe, Match: func(r *http.Request) bool { return r.URL.Path == "/graphql" }}
	fc, err := forge.New(forge.Config{BaseURL: "http://sim/", Token: "tok", Next: queries})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	sim.ResetStats()
	return fc, queries, stop
}

// TestSweepConcurrencyShortensAPassWithinItsBudget pins SweepConcurrency
// against the simulator with GitHub's latency model: 1,000 open runs, 10
// passes, one batch at a time (the default), one at a time with three
// quarters of GitHub's GraphQL time a minute (45 s), and two at once with
// the 45 s, side by side. With
// two, at most two queries are ever in flight, a pass takes at most 30%
// of its interval on average, less than one at a time with the same
// budget (about 37%, the model's mean of 2.2 s a query, 10 queries), the
// simulator's busiest minute stays
// within the 45 s (and 30 s one at a time), no pass fails, and no fewer
// passes check every run.
func TestSweepConcurrencyShortensAPassWithinItsBudget(t *testing.T) {
	t.Parallel() // virtual time: its figures do not depend on what else runs
	const n, passes = 1000, 10
	var one, oneWide, two concurrencyRun
	t.Run("one at a time", func(t *testing.T) { one = sweepConcurrently(t, n, passes, 1, 0) })
	t.Run("one at a time, 45 s", func(t *testing.T) { oneWide = sweepConcurrently(t, n, passes, 1, 0.75) })
	t.Run("two at once, 45 s", func(t *testing.T) { two = sweepConcurrently(t, n, passes, 2, 0.75) })
	for _, c := range []struct {
		name string
		r    concurrencyRun
	}{{"one at a time, 30 s", one}, {"one at a time, 45 s", oneWide}, {"two at once, 45 s", two}} {
		t.Logf("%s: pass ÷ interval %.2f mean, %.2f most; %d of %d passes checked every run; busiest minute %.1f s; %d queries",
			c.name, c.r.meanDuty, c.r.maxDuty, c.r.done, passes, c.r.maxMinute, c.r.queries)
	}
	if two.meanDuty >= oneWide.meanDuty {
		t.Errorf("a pass takes %.2f of its interval two at once, %.2f one at a time with the same budget; want less: the concurrency, not the budget, shortens it", two.meanDuty, oneWide.meanDuty)
	}
	if one.mostInFlight != 1 || two.mostInFlight != 2 {
		t.Errorf("queries in flight at once: %d and %d, want 1 and 2", one.mostInFlight, two.mostInFlight)
	}
	if two.meanDuty > 0.30 || two.meanDuty >= one.meanDuty {
		t.Errorf("two at once: a pass takes %.2f of its interval on average (one at a time: %.2f), want at most 0.30 and less", two.meanDuty, one.meanDuty)
	}
	if two.maxMinute > 45 || oneWide.maxMinute > 45 || one.maxMinute > 30 {
		t.Errorf("busiest minute: %.1f s one at a time, %.1f s with 45 s, %.1f s two at once; want at most 30, 45 and 45: the budget keeps a whole timeout free for each query in flight", one.maxMinute, oneWide.maxMinute, two.maxMinute)
	}
	if two.done < one.done {
		t.Errorf("passes that checked every run: %d two at once, %d one at a time; want no fewer", two.done, one.done)
	}
}

// TestSweepWidenedBatchIsAtMostOneQuery pins the span a pass's last room
// reads a timed-out batch's runs in (widened): at most sweepBatch runs,
// forge.MaxPullBatch, since PullStates refuses more and its runs would all
// fail unread. With two batches in flight, both can time out and leave
// their halves pending side by side, up to twice that.
func TestSweepWidenedBatchIsAtMostOneQuery(t *testing.T) {
	for _, c := range []struct {
		name      string
		sp        [2]int
		pending   [][2]int
		next, end int
		want      [2]int
		wantLeft  [][2]int
		wantNext  int
	}{
		{"the halves of one batch are joined into it",
			[2]int{0, 50}, [][2]int{{50, 100}}, 100, 100, [2]int{0, 100}, nil, 100},
		{"the halves of two batches timed out at once are joined up to one query",
			[2]int{50, 100}, [][2]int{{100, 150}, {150, 200}}, 200, 200, [2]int{50, 150}, [][2]int{{150, 200}}, 200},
		{"the page's runs past next are taken up to one query",
			[2]int{0, 25}, nil, 25, 200, [2]int{0, 100}, nil, 100},
	} {
		wide, left, next := server.Widened(c.sp, c.pending, c.next, c.end)
		if wide != c.want || !slices.Equal(left, c.wantLeft) || next != c.wantNext {
			t.Errorf("%s: got %v, pending %v, next %d; want %v, %v, %d", c.name, wide, left, next, c.want, c.wantLeft, c.wantNext)
		}
		if n := wide[1] - wide[0]; n > forge.MaxPullBatch {
			t.Errorf("%s: got a span of %d runs, want at most forge.MaxPullBatch (%d): one query", c.name, n, forge.MaxPullBatch)
		}
	}
}

// TestSweepConcurrencyKeepsATimeoutFreeForEachQueryInFlight pins the
// reserve a batch begun beside others keeps (roomForAnother): a whole
// GitHub timeout of the time budget for each query in flight and one for
// itself, whether or not an earlier query has been charged yet. At the
// most concurrency offered (MaxSweepConcurrency), the default budget
// (30 s of GitHub's GraphQL time a minute) and queries of 9 s, a pass
// that starts with nothing spent begins three at once, not four: a
// fourth could take the minute to 40 s should all four run to GitHub's
// 10 s timeout, and takes it to 36 s even at 9 s each.
func TestSweepConcurrencyKeepsATimeoutFreeForEachQueryInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lat := steadyLatency()
		lat.GraphQLBase, lat.GraphQLPerNode = 9*time.Second, 0
		sim := forgesim.New(forgesim.WithLatency(lat))
		_, runs, stopSim := seedSweepRuns(t, sim, 1000, 0)
		defer stopSim()
		fc, queries, stopPipe := queriesInFlight(t, sim)
		defer stopPipe()
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass,
			Concurrency: server.MaxSweepConcurrency})
		if ps := sweepFor(sw, rec, 2*time.Minute+59*time.Second); len(ps) != 2 {
			t.Fatalf("got %d passes in 2 intervals, want 2", len(ps))
		}
		if got := queries.Most(); got != 3 {
			t.Errorf("queries in flight at once: got %d, want 3: the 30 s budget keeps a 10 s timeout free for each query in flight and the next", got)
		}
		checkGraphQLMinutes(t, sim, "", ": a whole timeout is kept free for each query in flight")
	})
}

package forgesim_test

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// refusalsOf is the refusal counts of st by kind and resource.
func refusalsOf(st forgesim.Stats) map[string]int64 {
	out := map[string]int64{}
	for _, r := range st.Refusals {
		out[r.Resource+" "+r.Kind] += r.Count
	}
	return out
}

func TestRefusalsAreCountedByTheKindOfLimit(t *testing.T) {
	viewer := gqlBody(`{ viewer { login } }`)
	cases := []struct {
		rule string
		opts []forgesim.Option
		send func(sim *forgesim.Sim)
		want string
	}{
		{"the hourly budget refuses REST: primary", []forgesim.Option{forgesim.WithBudget(0)},
			func(sim *forgesim.Sim) { call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil) }, "core primary"},
		{"the hourly budget refuses GraphQL with RATE_LIMITED: primary", []forgesim.Option{forgesim.WithBudget(0)},
			func(sim *forgesim.Sim) { call(sim, "POST", "/graphql", "t", strings.NewReader(viewer)) }, "graphql primary"},
		{"GraphQL's points a minute: secondary points",
			[]forgesim.Option{forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{GraphQLPointsPerMinute: 1})},
			func(sim *forgesim.Sim) {
				call(sim, "POST", "/graphql", "t", strings.NewReader(viewer))
				call(sim, "POST", "/graphql", "t", strings.NewReader(viewer))
			}, "graphql secondary_points"},
		{"GraphQL's CPU time a minute: CPU time",
			[]forgesim.Option{forgesim.WithLatency(flat()), forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{GraphQLCPUPerMinute: time.Second})},
			func(sim *forgesim.Sim) {
				call(sim, "POST", "/graphql", "t", strings.NewReader(viewer)) // 1 s: the minute is spent
				call(sim, "POST", "/graphql", "t", strings.NewReader(viewer))
			}, "graphql cpu_time"},
		{"requests in flight: concurrency",
			[]forgesim.Option{forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{Concurrent: 1})},
			func(sim *forgesim.Sim) {
				pr, pw := io.Pipe()
				var wg sync.WaitGroup
				wg.Go(func() { call(sim, "POST", "/graphql", "t", pr) })
				synctest.Wait()
				call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil)
				pw.Close()
				wg.Wait()
			}, "core concurrency"},
		{"a secondary limit injected by SecondaryLimit: injected", nil,
			func(sim *forgesim.Sim) {
				mustOK(t, sim.SecondaryLimit("", time.Minute, 1))
				call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil)
			}, "core injected"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim := forgesim.New(c.opts...)
				seedPulls(t, sim, 1)
				c.send(sim)
				got := refusalsOf(sim.Stats())
				if len(got) != 1 || got[c.want] != 1 {
					t.Errorf("refusals: got %v, want exactly one %q: each refusal is counted under the limit that refused it", got, c.want)
				}
			})
		})
	}
}

func TestCPUMinutesAreTheResponseTimeOfEachOfTheSimulatorsMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const minute = 6 * time.Second
		sim := forgesim.New(forgesim.WithLatency(flat()), forgesim.WithMinute(minute))
		seedPulls(t, sim, 1)
		start := time.Now().UTC()
		viewer := gqlBody(`{ viewer { login } }`)
		for range 3 { // 1 s of GitHub's time each, 100 ms on a 6-s minute
			call(sim, "POST", "/graphql", "t", strings.NewReader(viewer))
		}
		call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil) // 1 s, REST
		time.Sleep(minute)
		call(sim, "POST", "/graphql", "t", strings.NewReader(viewer))
		type key struct {
			res   string
			start time.Duration
		}
		got := map[key]float64{}
		for _, m := range sim.Stats().CPUMinutes {
			if m.Principal != "t" {
				t.Errorf("minute of %q, want only t's", m.Principal)
			}
			got[key{m.Resource, m.Start.Sub(start)}] = m.Seconds
		}
		after := 4*minute/60 + minute // the second minute opened with the query after the sleep
		want := map[key]float64{{"graphql", 0}: 3, {"all", 0}: 4, {"graphql", after}: 1, {"all", after}: 1}
		if len(got) != len(want) {
			t.Fatalf("CPU minutes: got %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("CPU minute %v: got %v s, want %v s: each minute holds GitHub's seconds of the requests it charged, GraphQL's apart", k, got[k], v)
			}
		}
	})
}

func TestReadsAreThePullRequestsAnAnswerDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := flat()
		l.GraphQLPerNode = 100 * time.Millisecond // 100 pulls: 11 s, past the timeout; 3 pulls: 1.3 s
		sim := forgesim.New(forgesim.WithLatency(l))
		seedPulls(t, sim, 100)
		start := time.Now()
		if rec := call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(pullsQuery(3)))); rec.Code != 200 {
			t.Fatalf("3 pulls: got %d, want 200", rec.Code)
		}
		if rec := call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(pullsQuery(100)))); rec.Code < 500 {
			t.Fatalf("100 pulls: got %d, want the timeout", rec.Code)
		}
		call(sim, "GET", "/repos/acme/app/pulls/7", "u", nil)
		reads := sim.Reads("")
		got := map[string][]time.Duration{}
		for _, r := range reads {
			k := r.Principal + " " + r.Repo + " " + strconv.Itoa(r.Number)
			for _, at := range r.At {
				got[k] = append(got[k], at.Sub(start))
			}
		}
		answered := 1300 * time.Millisecond
		rest := answered + forgesim.GraphQLTimeout + time.Second
		want := map[string][]time.Duration{
			"t acme/app 1": {answered}, "t acme/app 2": {answered}, "t acme/app 3": {answered},
			"u acme/app 7": {rest},
		}
		if len(got) != len(want) {
			t.Fatalf("reads: got %v, want %v: only answers the client got read a pull request (not the timed-out query's)", got, want)
		}
		for k, v := range want {
			if len(got[k]) != 1 || got[k][0] != v[0] {
				t.Errorf("reads of %s: got %v, want %v: a read is when its answer was delivered", k, got[k], v)
			}
		}
		if only := sim.Reads("u"); len(only) != 1 || only[0].Number != 7 {
			t.Errorf("Reads(u): got %+v, want pull 7 alone: reads are the principal's", only)
		}
	})
}

// TestANotModifiedAnswerReadsItsPullRequest pins that a REST read of a
// pull request answered 304 reads it, as a 200 does: the 304 tells the
// client that the copy it kept is the pull request as it is now.
func TestANotModifiedAnswerReadsItsPullRequest(t *testing.T) {
	sim := forgesim.New(forgesim.WithClock((&clock{t: t0}).Now))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	first := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil)
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil, "If-None-Match", first.Header().Get("ETag")); rec.Code != 304 {
		t.Fatalf("conditional GET of an unchanged pull: got %d, want 304", rec.Code)
	}
	if reads := sim.Reads("t"); len(reads) != 1 || len(reads[0].At) != 2 {
		t.Errorf("reads after a 200 and a 304: got %+v, want pull 1 read twice: a 304 reads the pull request", reads)
	}
}

func TestInjectedBadGatewaysAreChargedAndDeliverNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New(forgesim.WithLatency(flat()), forgesim.WithGraphQLFaults(forgesim.GraphQLFaults{BadGatewayShare: 1}))
		seedPulls(t, sim, 10)
		rec, took := timed(sim, "POST", "/graphql", "t", gqlBody(pullsQuery(10)))
		if rec.Code != 502 || rec.Header().Get("X-Ratelimit-Used") != "1" || took != time.Second+50*time.Millisecond {
			t.Errorf("with every query failing: got %d, used %q, after %v; want 502, 1 point charged, after its modelled 1.05 s: the query ran, the gateway failed",
				rec.Code, rec.Header().Get("X-Ratelimit-Used"), took)
		}
		if r := sim.Reads(""); len(r) != 0 {
			t.Errorf("reads after a 502: got %+v, want none: the client got no data", r)
		}
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 200 {
			t.Errorf("REST with GraphQL faults on: got %d, want 200: the faults are GraphQL's", rec.Code)
		}
		mustOK(t, sim.SetGraphQLFaults(forgesim.GraphQLFaults{}))
		if rec := call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(pullsQuery(10)))); rec.Code != 200 {
			t.Errorf("after SetGraphQLFaults(zero): got %d, want 200: the faults stop", rec.Code)
		}
		slow := flat()
		slow.GraphQLBase = 20 * time.Second
		mustOK(t, sim.SetLatency(slow))
		if rec := call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(pullsQuery(10)))); rec.Code != 504 {
			t.Errorf("after SetLatency(a 20-s query): got %d, want 504: the new model answers", rec.Code)
		}
		mustOK(t, sim.SetLatency(flat()))
		mustOK(t, sim.SetGraphQLFaults(forgesim.GraphQLFaults{BadGatewayShare: 0.01, Seed: 1}))
		bad := 0
		for range 2000 {
			if call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(`{ viewer { login } }`))).Code == 502 {
				bad++
			}
		}
		if bad < 10 || bad > 35 {
			t.Errorf("a 1%% share: got %d 502s of 2,000, want about 20", bad)
		}
		if rec := call(sim, "POST", "/_sim/faults", "", strings.NewReader(`{"bad_gateway_share":1.5}`)); rec.Code != 400 || !strings.Contains(rec.Body.String(), "bad_gateway_share") {
			t.Errorf("a share of 1.5: got %d %s, want 400 naming bad_gateway_share", rec.Code, rec.Body)
		}
	})
}

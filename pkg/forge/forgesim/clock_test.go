package forgesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// The latency model and the rules that need time: every test runs in a
// synctest bubble, where the simulator's waits are virtual.

// timed serves one request and says how long it took on the bubble's clock.
func timed(sim *forgesim.Sim, method, path, token, body string) (*httptest.ResponseRecorder, time.Duration) {
	start := time.Now()
	rec := call(sim, method, path, token, strings.NewReader(body))
	return rec, time.Since(start)
}

// TestAWaitEndsWithItsRequest: a modelled wait ends the instant its
// request's context does (the client gave up, or the server is shutting
// down), and the request ends unanswered (http.ErrAbortHandler) rather than
// answered before its time.
func TestAWaitEndsWithItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New(forgesim.WithLatency(flat())) // a REST answer takes 1 s
		seedPulls(t, sim, 1)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(300*time.Millisecond, cancel)
		req := httptest.NewRequestWithContext(ctx, "GET", "/repos/acme/app/pulls/1", nil)
		req.Header.Set("Authorization", "token t")
		rec := httptest.NewRecorder()
		start := time.Now()
		var ended any
		func() {
			defer func() { ended = recover() }()
			sim.ServeHTTP(rec, req)
		}()
		if took := time.Since(start); ended != http.ErrAbortHandler || took != 300*time.Millisecond || rec.Body.Len() != 0 {
			t.Errorf("got %v after %v with %d bytes of answer, want http.ErrAbortHandler after 300ms and no answer: a wait ends with its request's context, unanswered", ended, took, rec.Body.Len())
		}
	})
}

// gqlBody is a GraphQL request body for query.
func gqlBody(query string) string {
	b, _ := json.Marshal(map[string]string{"query": query})
	return string(b)
}

// nodes100 asks for 100 nodes of one pull request: as many as a 100-pull
// batch, at a fraction of its cost to run.
const nodes100 = `{ repository(owner: "acme", name: "app") { pullRequest(number: 1) { commits(last: 100) { totalCount } } } }`

// flat is GitHub's latency model without its tail: every answer its median.
func flat() forgesim.Latency {
	l := forgesim.GitHubLatency()
	l.Tail = 0
	return l
}

func seedPulls(t *testing.T, sim *forgesim.Sim, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		mustOK(t, sim.SeedPull("acme", "app", i, fmt.Sprintf("sha%d", i), "open"))
	}
}

func TestLatencyModelIsOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		seedPulls(t, sim, 100)
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/repos/acme/app/pulls/1", ""},
			{"POST", "/graphql", gqlBody(pullsQuery(100))},
		} {
			if rec, took := timed(sim, c.method, c.path, "t", c.body); rec.Code != 200 || took != 0 {
				t.Errorf("%s %s: got %d after %v, want 200 at once: without WithLatency answers are instant", c.method, c.path, rec.Code, took)
			}
		}
		for _, rc := range sim.Stats().Requests {
			if rc.Seconds != 0 {
				t.Errorf("stats %s: got %v s, want 0: no model, no modelled time", rc.Route, rc.Seconds)
			}
		}
	})
}

func TestAnswersTakeTheirModelledTimeOnTheSimulatorsClock(t *testing.T) {
	cases := []struct {
		why          string
		minute       time.Duration
		method, path string
		body         string
		want         time.Duration
	}{
		{"a REST request of a route the model does not name takes RESTDefault", time.Minute,
			"GET", "/repos/acme/app/pulls/1", "", time.Second},
		{"a route REST names takes its own figure", time.Minute,
			"GET", "/repos/acme/app/commits/sha1/status", "", 3 * time.Second},
		{"a REST page of issues takes RESTPage, 2 s", time.Minute,
			"GET", "/repos/acme/app/issues?per_page=100", "", 2 * time.Second},
		{"a GraphQL query asking for no nodes takes GraphQLBase", time.Minute,
			"POST", "/graphql", gqlBody(`{ viewer { login } }`), time.Second},
		{"a 100-pull GraphQL query (100 nodes) takes 1 s + 100 × 5 ms = 1.5 s", time.Minute,
			"POST", "/graphql", gqlBody(pullsQuery(100)), 1500 * time.Millisecond},
		{"with a minute compressed to 6 s, the same query takes a tenth: 150 ms", 6 * time.Second,
			"POST", "/graphql", gqlBody(pullsQuery(100)), 150 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := flat()
				l.REST = map[string]time.Duration{"GET /repos/{owner}/{repo}/commits/{ref}/status": 3 * time.Second}
				sim := forgesim.New(forgesim.WithLatency(l), forgesim.WithMinute(c.minute))
				seedPulls(t, sim, 100)
				rec, took := timed(sim, c.method, c.path, "t", c.body)
				if rec.Code != 200 || took != c.want {
					t.Fatalf("got %d after %v, want 200 after %v: %s", rec.Code, took, c.want, c.why)
				}
				var secs float64
				for _, rc := range sim.Stats().Requests {
					secs += rc.Seconds
				}
				if want := float64(c.want) * float64(time.Minute) / float64(c.minute) / float64(time.Second); secs != want {
					t.Errorf("stats: got %v s, want %v s: stats count GitHub's seconds, not the compressed wait", secs, want)
				}
			})
		})
	}
}

func TestGitHubLatencyHasTheFiguresMedianAndTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		run := func(seed uint64, perQuery bool) ([]time.Duration, int) {
			l := forgesim.GitHubLatency()
			l.Seed, l.PerQuery = seed, perQuery
			sim := forgesim.New(forgesim.WithLatency(l), forgesim.WithBudget(1<<30),
				forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{}))
			seedPulls(t, sim, 1)
			var times []time.Duration
			var timeouts int
			for range n {
				rec, took := timed(sim, "POST", "/graphql", "t", gqlBody(nodes100))
				switch rec.Code {
				case 200:
				case 502, 504:
					timeouts++
				default:
					t.Fatalf("got %d %s, want an answer or a timeout", rec.Code, rec.Body)
				}
				times = append(times, took)
			}
			return times, timeouts
		}
		for _, perQuery := range []bool{false, true} {
			times, timeouts := run(1, perQuery)
			sorted := slices.Sorted(slices.Values(times))
			if med := sorted[n/2]; med < 1350*time.Millisecond || med > 1650*time.Millisecond {
				t.Errorf("PerQuery %v: median of %d 100-node queries: got %v, want 1.5 s ± 10%%: the median of a 100-pull query", perQuery, n, med)
			}
			if timeouts < 10 || timeouts > 35 {
				t.Errorf("PerQuery %v: timeouts: got %d of %d, want about 2%% (10–35): the tail times out 2%% of 100-pull queries", perQuery, timeouts, n)
			}
			again, _ := run(1, perQuery)
			if !slices.Equal(times, again) {
				t.Errorf("PerQuery %v: the same seed twice: got different times, want the same: draws are seeded", perQuery)
			}
			other, _ := run(2, perQuery)
			if slices.Equal(times, other) {
				t.Errorf("PerQuery %v: another seed: got the same times, want others", perQuery)
			}
		}
	})
}

// TestLatencyPerQueryMeetsTheSameDrawsWhateverElseIsAsked pins
// Latency.PerQuery: a principal's k-th sending of a query takes the same
// time (and the same timeout answer) on two simulators of one seed, though
// one of them also answers other queries, other principals and REST
// requests in between; without it, those shift the stream.
func TestLatencyPerQueryMeetsTheSameDrawsWhateverElseIsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 500
		other := strings.Replace(nodes100, "number: 1", "number: 2", 1)
		run := func(perQuery, busy bool) (times []time.Duration, codes []int) {
			l := forgesim.GitHubLatency()
			l.Seed, l.PerQuery = 7, perQuery
			sim := forgesim.New(forgesim.WithLatency(l), forgesim.WithBudget(1<<30),
				forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{}))
			seedPulls(t, sim, 2)
			for range n {
				if busy {
					timed(sim, "POST", "/graphql", "u", gqlBody(nodes100))
					timed(sim, "POST", "/graphql", "t", gqlBody(other))
					timed(sim, "GET", "/repos/acme/app/pulls/1", "t", "")
				}
				rec, took := timed(sim, "POST", "/graphql", "t", gqlBody(nodes100))
				times, codes = append(times, took), append(codes, rec.Code)
			}
			return times, codes
		}
		quiet, quietCodes := run(true, false)
		busy, busyCodes := run(true, true)
		if !slices.Equal(quiet, busy) || !slices.Equal(quietCodes, busyCodes) {
			t.Errorf("PerQuery: the same query's times with other requests in between differ, want the same: a query's draws follow its own sendings")
		}
		if slices.Index(quietCodes, 504) < 0 && slices.Index(quietCodes, 502) < 0 {
			t.Errorf("PerQuery: no timeout in %d sendings of a 100-node query, want about 2%%: the k-th sending draws anew", n)
		}
		if slices.Equal(slices.Compact(slices.Clone(quiet)), quiet[:1]) {
			t.Errorf("PerQuery: every sending took %v, want fresh draws", quiet[0])
		}
		inOrder, _ := run(false, false)
		inOrderBusy, _ := run(false, true)
		if slices.Equal(inOrder, inOrderBusy) {
			t.Errorf("without PerQuery: got the same times with other requests in between, want them shifted: one stream in the order requests arrive")
		}
	})
}

func TestTailForTimesOutTheAskedShare(t *testing.T) {
	for _, c := range []struct {
		median time.Duration
		share  float64
		want   float64
	}{
		{1500 * time.Millisecond, 0.02, 0.9237}, // ln(10/1.5) / 2.0537
		{time.Second, 0.01, 0.9898},             // ln 10 / 2.3263
		{time.Second, 0, 0},
		{10 * time.Second, 0.02, 0},
	} {
		if got := forgesim.TailFor(c.median, c.share); got < c.want-0.001 || got > c.want+0.001 {
			t.Errorf("TailFor(%v, %v): got %.4f, want %.4f: P(median·e^(σZ) > 10 s) = share", c.median, c.share, got, c.want)
		}
	}
}

// GraphQLTime is the model's draw: a 100-node query's median is 1.5 s
// under GitHubLatency, 2% of its draws run past GitHub's 10 s and are
// charged exactly that, and a query of half the nodes times out less
// often (its median is lower under the same tail).
func TestGraphQLTimeDrawsTheModel(t *testing.T) {
	lat := forgesim.GitHubLatency()
	rng := rand.New(rand.NewPCG(1, 2))
	const draws = 100_000
	share := func(nodes int) (timedOut float64, median time.Duration) {
		times := make([]time.Duration, draws)
		n := 0
		for i := range times {
			took, out := lat.GraphQLTime(rng, nodes)
			if out {
				n++
				if took != forgesim.GraphQLTimeout {
					t.Fatalf("%d nodes: a timed-out draw took %v, want GitHub's %v", nodes, took, forgesim.GraphQLTimeout)
				}
			} else if took > forgesim.GraphQLTimeout {
				t.Fatalf("%d nodes: a draw took %v and did not time out, want a timeout past %v", nodes, took, forgesim.GraphQLTimeout)
			}
			times[i] = took
		}
		slices.Sort(times)
		return float64(n) / draws, times[draws/2]
	}
	full, median := share(100)
	if full < 0.018 || full > 0.022 {
		t.Errorf("100 nodes: %.2f%% of draws timed out, want 2%% (GitHubLatency's tail)", 100*full)
	}
	if median < 1450*time.Millisecond || median > 1550*time.Millisecond {
		t.Errorf("100 nodes: median %v, want 1.5 s", median)
	}
	if half, _ := share(50); half >= full {
		t.Errorf("50 nodes: %.2f%% timed out, 100 nodes %.2f%%; want fewer: a smaller query's median is lower", 100*half, 100*full)
	}
}

func TestLatencyValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		field string
		edit  func(*forgesim.Latency)
	}{
		{"RESTDefault", func(l *forgesim.Latency) { l.RESTDefault = -time.Second }},
		{"REST[GET /x]", func(l *forgesim.Latency) { l.REST = map[string]time.Duration{"GET /x": -1} }},
		{"RESTPage", func(l *forgesim.Latency) { l.RESTPage = -1 }},
		{"GraphQLPerNode", func(l *forgesim.Latency) { l.GraphQLPerNode = -1 }},
		{"Tail", func(l *forgesim.Latency) { l.Tail = -0.5 }},
		{"BadGatewayShare", func(l *forgesim.Latency) { l.BadGatewayShare = 2 }},
	} {
		l := forgesim.GitHubLatency()
		c.edit(&l)
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Validate with a bad %s: got %v, want an error naming it", c.field, err)
		}
	}
	if err := forgesim.GitHubLatency().Validate(); err != nil {
		t.Errorf("Validate(GitHubLatency()): got %v, want nil", err)
	}
}

func TestGraphQLQueryPastTenSecondsTimesOutAndIsStillCharged(t *testing.T) {
	for _, c := range []struct {
		share  float64
		status int
	}{{1, 502}, {0, 504}} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := flat()
				l.GraphQLPerNode = 100 * time.Millisecond // 100 pulls: 1 s + 10 s
				l.BadGatewayShare = c.share
				sim := forgesim.New(forgesim.WithLatency(l))
				seedPulls(t, sim, 100)
				rec, took := timed(sim, "POST", "/graphql", "t", gqlBody(pullsQuery(100)))
				if rec.Code != c.status || !strings.Contains(rec.Body.String(), "We couldn't respond to your request in time") {
					t.Errorf("a query modelled at 11 s: got %d %s, want %d with GitHub's timeout message", rec.Code, rec.Body, c.status)
				}
				if took != forgesim.GraphQLTimeout {
					t.Errorf("got the answer after %v, want %v: GitHub stops the query at 10 s", took, forgesim.GraphQLTimeout)
				}
				if used := rec.Header().Get("X-Ratelimit-Used"); used != "1" {
					t.Errorf("x-ratelimit-used: got %q, want 1: a timed-out query's points are still charged", used)
				}
				st := sim.Stats().Requests
				if len(st) != 1 || st[0].Points != 1 || st[0].Seconds != 10 {
					t.Errorf("stats: got %+v, want one request, 1 point, 10 s", st)
				}
			})
		})
	}
}

func TestRESTRequestPastTenSecondsIsAServerErrorAtTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := flat()
		l.RESTPage = 12 * time.Second
		sim := forgesim.New(forgesim.WithLatency(l))
		mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "x", State: "open"}))
		rec, took := timed(sim, "GET", "/repos/acme/app/issues", "t", "")
		if rec.Code != 502 || !strings.Contains(rec.Body.String(), `"Server Error"`) {
			t.Errorf("an issues page modelled at 12 s: got %d %s, want 502 Server Error: GitHub terminates a request past 10 s", rec.Code, rec.Body)
		}
		if took != forgesim.RESTTimeout {
			t.Errorf("got the answer after %v, want %v: GitHub stops the request at 10 s", took, forgesim.RESTTimeout)
		}
		st := sim.Stats().Requests
		if len(st) != 1 || st[0].Points != 1 || st[0].Seconds != 10 {
			t.Errorf("stats: got %+v, want one request, charged 1, 10 s", st)
		}
		if rec, took := timed(sim, "GET", "/repos/acme/app/pulls/1", "t", ""); rec.Code != 404 || took != time.Second {
			t.Errorf("a request modelled at 1 s: got %d after %v, want its answer (404, no such pull) after 1 s: only requests past 10 s time out", rec.Code, took)
		}
	})
}

func TestCPUTimeSecondaryLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := flat()
		l.RESTDefault = 5 * time.Second
		l.GraphQLBase = 9 * time.Second
		sim := forgesim.New(forgesim.WithLatency(l), forgesim.WithBudget(1<<20))
		seedPulls(t, sim, 1)
		burst := func(n int, tok, method, path, body string) map[int]int {
			return burstOf(t, sim, n, tok, method, path, body)
		}
		viewer := gqlBody(`{ viewer { login } }`)
		if got := burst(8, "t", "POST", "/graphql", viewer); got[200] != 7 || got[403] != 1 {
			t.Errorf("8 concurrent 9-s queries: got %v, want 7 answered and 1 refused 403: at most 60 s of GraphQL time a minute, the one crossing it answered", got)
		}
		if got := burst(7, "t", "GET", "/repos/acme/app/pulls/1", ""); got[200] != 6 || got[403] != 1 {
			t.Errorf("7 concurrent 5-s REST reads after 63 s of GraphQL: got %v, want 6 answered and 1 refused: 90 s of response time a minute, REST and GraphQL together", got)
		}
		if got := burst(1, "u", "POST", "/graphql", viewer); got[200] != 1 {
			t.Errorf("another principal: got %v, want its query answered: the limit is the principal's", got)
		}
		rec := call(sim, "POST", "/graphql", "t", strings.NewReader(viewer))
		wait, _ := time.ParseDuration(rec.Header().Get("Retry-After") + "s")
		if rec.Code != 403 || wait <= 0 {
			t.Fatalf("t again within the minute: got %d retry-after %q, want 403 with retry-after", rec.Code, rec.Header().Get("Retry-After"))
		}
		time.Sleep(wait)
		if rec := call(sim, "POST", "/graphql", "t", strings.NewReader(viewer)); rec.Code != 200 {
			t.Errorf("after retry-after: got %d, want 200: the window is a minute", rec.Code)
		}
	})
}

// burstOf sends n requests of tok to sim at once and counts their
// statuses; a 403 must be a secondary limit's.
func burstOf(t *testing.T, sim *forgesim.Sim, n int, tok, method, path, body string) map[int]int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := map[int]int{}
	for range n {
		wg.Go(func() {
			rec := call(sim, method, path, tok, strings.NewReader(body))
			if rec.Code == 403 && !strings.Contains(rec.Body.String(), "secondary rate limit") {
				t.Errorf("a refusal: got %s, want the secondary-limit message", rec.Body)
			}
			mu.Lock()
			got[rec.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// TestDefaultSecondaryLimitsAreGitHubsFigures pins the figures of
// GitHubSecondaryLimits that no other test meets at their edge: 100
// requests in flight, 90 s of response time a minute, 60 s of it for
// GraphQL ("Rate limits for the REST API", About secondary rate limits:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
// Every figure published from the simulator runs under them.
func TestDefaultSecondaryLimitsAreGitHubsFigures(t *testing.T) {
	t.Run("100 concurrent requests", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := flat()
			l.RESTDefault = 100 * time.Millisecond // 10 s for 100: far from the CPU limit
			sim := forgesim.New(forgesim.WithLatency(l))
			seedPulls(t, sim, 1)
			if got := burstOf(t, sim, 101, "t", "GET", "/repos/acme/app/pulls/1", ""); got[200] != 100 || got[429] != 1 {
				t.Errorf("101 concurrent reads: got %v, want 100 answered and 1 refused 429: no more than 100 concurrent requests", got)
			}
		})
	})
	t.Run("90 s of CPU time, 60 s of it GraphQL's", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := flat()
			l.RESTDefault, l.GraphQLBase = time.Second, time.Second
			sim := forgesim.New(forgesim.WithLatency(l))
			seedPulls(t, sim, 1)
			if got := burstOf(t, sim, 61, "t", "POST", "/graphql", gqlBody(`{ viewer { login } }`)); got[200] != 60 || got[403] != 1 {
				t.Errorf("61 concurrent 1-s queries: got %v, want 60 answered and 1 refused: no more than 60 s of GraphQL time a minute", got)
			}
			if got := burstOf(t, sim, 31, "t", "GET", "/repos/acme/app/pulls/1", ""); got[200] != 30 || got[403] != 1 {
				t.Errorf("31 concurrent 1-s reads after 60 s of GraphQL: got %v, want 30 answered and 1 refused: no more than 90 s of response time a minute", got)
			}
		})
	})
}

func TestGraphQLLimitAnswersInEitherOfGitHubsShapes(t *testing.T) {
	cases := []struct {
		answer  forgesim.GraphQLLimitAnswer
		limit   string // "primary" or "secondary"
		status  int
		errType string // the errors array's first type; "" when there is no errors array
		message string
	}{
		{forgesim.GraphQLLimitMixed, "primary", 200, "RATE_LIMITED", "API rate limit exceeded"},
		{forgesim.GraphQLLimitMixed, "secondary", 403, "", "secondary rate limit"},
		{forgesim.GraphQLLimit200, "primary", 200, "RATE_LIMITED", "API rate limit exceeded"},
		{forgesim.GraphQLLimit200, "secondary", 200, "", "secondary rate limit"},
		{forgesim.GraphQLLimit403, "primary", 403, "", "API rate limit exceeded"},
		{forgesim.GraphQLLimit403, "secondary", 403, "", "secondary rate limit"},
	}
	for _, c := range cases {
		t.Run(c.answer.String()+"/"+c.limit, func(t *testing.T) {
			sim := forgesim.New(forgesim.WithGraphQLLimitAnswer(c.answer))
			if c.limit == "primary" {
				mustOK(t, sim.SetBudget("t", 0))
			} else {
				mustOK(t, sim.SecondaryLimit("t", time.Minute, 1))
			}
			rec := call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(`{ viewer { login } }`)))
			var body struct {
				Message string
				Errors  []struct{ Type, Message string }
			}
			mustOK(t, json.Unmarshal(rec.Body.Bytes(), &body))
			msg := body.Message
			if c.status == 200 {
				if len(body.Errors) != 1 || body.Errors[0].Type != c.errType {
					t.Fatalf("got %s, want one error of type %q", rec.Body, c.errType)
				}
				msg = body.Errors[0].Message
			}
			if rec.Code != c.status || !strings.Contains(msg, c.message) {
				t.Errorf("got %d %s, want %d saying %q: GitHub answers a GraphQL limit with 200 and errors, or 403; the simulator answers as told", rec.Code, rec.Body, c.status, c.message)
			}
			if c.limit == "secondary" && rec.Header().Get("Retry-After") != "60" {
				t.Errorf("retry-after: got %q, want 60 in every shape", rec.Header().Get("Retry-After"))
			}
			if st := sim.Stats().Requests; len(st) != 1 || st[0].Points != 0 {
				t.Errorf("stats: got %+v, want one request charged nothing: a refusal is free", st)
			}
		})
	}
	var a forgesim.GraphQLLimitAnswer
	if err := a.Set("200"); err != nil || a != forgesim.GraphQLLimit200 {
		t.Errorf(`Set("200"): got %v, %v, want GraphQLLimit200`, a, err)
	}
	if err := a.Set("204"); err == nil || !strings.Contains(err.Error(), "graphql-limit-answer") {
		t.Errorf(`Set("204"): got %v, want an error naming graphql-limit-answer`, err)
	}
}

func TestStatusesPastAThousandPerSHAAndContextAre422(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	for i := range forgesim.MaxStatuses {
		ctx := "ci/review"
		if i%2 == 1 {
			ctx = "CI/Review" // contexts are case-insensitive: the same context
		}
		mustOK(t, sim.SetStatus("acme", "app", "sha", forgesim.Status{Context: ctx, State: "pending"}))
	}
	post := func(sha, ctx string) *httptest.ResponseRecorder {
		return call(sim, "POST", "/repos/acme/app/statuses/"+sha, "t", strings.NewReader(`{"state":"success","context":"`+ctx+`"}`))
	}
	if rec := post("sha", "ci/review"); rec.Code != 422 || !strings.Contains(rec.Body.String(), "This SHA and context has reached the maximum number of statuses.") {
		t.Errorf("status 1,001 of sha and ci/review: got %d %s, want 422 with GitHub's message: at most 1,000 per SHA and context", rec.Code, rec.Body)
	}
	if err := sim.SetStatus("acme", "app", "sha", forgesim.Status{Context: "CI/REVIEW", State: "success"}); err != forgesim.ErrStatusLimit {
		t.Errorf("SetStatus past the cap: got %v, want ErrStatusLimit: the control twin keeps the same cap", err)
	}
	if rec := post("sha", "ci/other"); rec.Code != 201 {
		t.Errorf("another context of the same SHA: got %d, want 201: the cap is per context", rec.Code)
	}
	mustOK(t, sim.PushHead("acme", "app", 1, "sha2"))
	if rec := post("sha2", "ci/review"); rec.Code != 201 {
		t.Errorf("the same context on another SHA: got %d, want 201: the cap is per SHA", rec.Code)
	}
	ctl := call(sim, "POST", "/_sim/repos/acme/app/statuses/sha", "", strings.NewReader(`{"state":"success","context":"ci/review"}`))
	if ctl.Code != 422 {
		t.Errorf("the control endpoint past the cap: got %d %s, want 422", ctl.Code, ctl.Body)
	}
}

func TestInstallationBudgetsFollowGitHubsScalingRule(t *testing.T) {
	for _, c := range []struct {
		why      string
		size     forgesim.InstallationSize
		resource string
		want     int
	}{
		{"the minimum", forgesim.InstallationSize{Repositories: 20, Users: 20}, "core", 5000},
		{"+50 per repository over 20", forgesim.InstallationSize{Repositories: 30}, "core", 5500},
		{"+50 per user over 20", forgesim.InstallationSize{Users: 41}, "core", 6050},
		{"both add up", forgesim.InstallationSize{Repositories: 30, Users: 30}, "core", 6000},
		{"capped at 12,500", forgesim.InstallationSize{Repositories: 1000, Users: 10}, "core", 12500},
		{"GraphQL points scale alike", forgesim.InstallationSize{Repositories: 30}, "graphql", 5500},
		{"Enterprise Cloud: 15,000 REST requests", forgesim.InstallationSize{Repositories: 5, EnterpriseCloud: true}, "core", 15000},
		{"Enterprise Cloud: 10,000 GraphQL points", forgesim.InstallationSize{Repositories: 500, EnterpriseCloud: true}, "graphql", 10000},
	} {
		if got := c.size.Budget(c.resource); got != c.want {
			t.Errorf("%s: %+v %s: got %d, want %d", c.why, c.size, c.resource, got, c.want)
		}
	}

	limit := func(sim *forgesim.Sim, tok, path, body string) string {
		method := "GET"
		if body != "" {
			method = "POST"
		}
		return call(sim, method, path, tok, strings.NewReader(body)).Header().Get("X-Ratelimit-Limit")
	}
	plain := forgesim.New()
	if got := limit(plain, mint(t, plain, 7), "/repos/acme/app/pulls/1", ""); got != "5000" {
		t.Errorf("an installation, no size asked: got limit %s, want 5000: the default stays the minimum", got)
	}
	sim := forgesim.New(forgesim.WithInstallationSize(forgesim.InstallationSize{Repositories: 120}))
	mustOK(t, sim.SetInstallationSize(8, forgesim.InstallationSize{EnterpriseCloud: true}))
	steps := []struct {
		why, token, path, body, want string
	}{
		{"every installation scales by WithInstallationSize", mint(t, sim, 7), "/repos/acme/app/pulls/1", "", "10000"},
		{"SetInstallationSize names one installation's size: Enterprise Cloud REST", mint(t, sim, 8), "/repos/acme/app/pulls/1", "", "15000"},
		{"Enterprise Cloud GraphQL", mint(t, sim, 8), "/graphql", gqlBody(`{ viewer { login } }`), "10000"},
		{"a plain token is a user: no scaling", "pat", "/repos/acme/app/pulls/1", "", "5000"},
	}
	for _, s := range steps {
		if got := limit(sim, s.token, s.path, s.body); got != s.want {
			t.Errorf("%s: got limit %s, want %s", s.why, got, s.want)
		}
	}
	tok := mint(t, sim, 9)
	mustOK(t, sim.SetBudget(tok, 42))
	if got := limit(sim, tok, "/repos/acme/app/pulls/1", ""); got != "42" {
		t.Errorf("SetBudget on a scaled installation: got limit %s, want 42: SetBudget wins", got)
	}
	for _, c := range []struct {
		id    int64
		size  forgesim.InstallationSize
		field string
	}{{0, forgesim.InstallationSize{}, "id"}, {1, forgesim.InstallationSize{Users: -1}, "users"}, {1, forgesim.InstallationSize{Repositories: -1}, "repositories"}} {
		if err := sim.SetInstallationSize(c.id, c.size); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("SetInstallationSize(%d, %+v): got %v, want an error naming %s", c.id, c.size, err, c.field)
		}
	}
}

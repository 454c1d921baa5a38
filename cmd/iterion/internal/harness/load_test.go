package harness

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// TestLoadScenario runs a reduced load scenario on real processes: 200 runs
// at concurrency 10 over 2 replicas with one dev-mongo SIGKILL and restart,
// 30 slow connections against a 3 s read timeout, and 20 unsigned 24 MiB
// webhooks. It asserts the open-network rules that do not depend on the
// machine's speed: every run answered 201 or 200 is stored exactly once,
// no slow connection outlives the read timeout, and the webhooks grow the
// peak RSS by less than 100 MB.
func TestLoadScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // cold builds of both commands included
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	o := Options{
		Bin:         bin,
		DevMongoBin: devMongo,
		Dir:         filepath.Join(dir, "run"),
		Interval:    200 * time.Millisecond,
		Runs:        1,
		Scenarios:   []string{ScenarioLoad},
		Load: LoadOptions{Requests: 200, Concurrency: 10, Outage: time.Second,
			SlowConns: 30, Probes: 50, ReadTimeout: 3 * time.Second, Webhooks: 20},
		Progress: testWriter{t},
	}
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Log("\n" + rep.Markdown("go test ./internal/harness -run TestLoadScenario"))
	l := rep.Load
	if l == nil {
		t.Fatal("got no load result, want one: the load scenario ran")
	}
	if l.Failed != 0 {
		t.Errorf("got %d runs with no 201 or 200 after %d attempts, want 0: a client retrying 503s and connection errors gets through once Mongo is back", l.Failed, maxAttempts)
	}
	if l.Lost != 0 || l.Duplicates != 0 || l.Unlisted != 0 {
		t.Errorf("got %d lost, %d duplicated, %d unlisted runs, want 0 each: every run answered 201 or 200 is stored exactly once", l.Lost, l.Duplicates, l.Unlisted)
	}
	if l.Stored != l.Requests {
		t.Errorf("got %d runs listed, want %d: every posted run is stored once", l.Stored, l.Requests)
	}
	if l.Unavailable+l.ConnErrors == 0 {
		t.Errorf("got no 503 and no connection error, want some: dev-mongo was killed while runs were posted")
	}
	if !l.ProbedWithin {
		t.Errorf("got the loaded probes ending after the %v read timeout, want before: the p99 with slow connections is measured while they are open", l.ReadTimeout)
	}
	if l.SlowOpen != 0 {
		t.Errorf("got %d of %d slow connections still open %v after the read timeout, want 0: --read-timeout cuts a trickling body", l.SlowOpen, l.SlowConns, slowGrace)
	}
	if g := l.HWMGrowth(); g >= 100e6 {
		t.Errorf("got peak RSS growth %.1f MB over %d unsigned 24 MiB webhooks, want under 100 MB: unsigned large bodies are streamed, not held", mb(g), l.Webhooks)
	}
}

// TestPercentileIsNearestRank pins percentile: the smallest value with at
// least p% of the values at or below it.
func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted: 100 down to 1
	}
	for _, c := range []struct {
		name string
		ds   []time.Duration
		p    int
		want time.Duration
	}{
		{"none is 0", nil, 99, 0},
		{"one value is every percentile", ms(7), 1, 7 * time.Millisecond},
		{"p50 of 1..100 is 50", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100 is 99", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the largest", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of 10 values is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p50 of 4 values is the 2nd", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
	} {
		if got := percentile(c.ds, c.p); got != c.want {
			t.Errorf("%s: got %v, want %v: nearest rank", c.name, got, c.want)
		}
	}
}

// TestReadBackCountsLostDuplicatedAndUnlistedRuns pins the load scenario's
// figures of the runs stored, from GET /api/runs served by a test server:
// a listed entry of a pull or id listed before is a duplicate, on any
// page; a run answered 201 or 200 that the list lacks is unlisted when GET
// /api/runs/{id} returns it and lost when it does not; a request that got
// no id is neither. A healthy run has none of them, so only a constructed
// list shows these counts can leave zero.
func TestReadBackCountsLostDuplicatedAndUnlistedRuns(t *testing.T) {
	pages := map[string]string{
		"":   `{"runs":[{"id":"a","pull":1},{"id":"b","pull":2}],"next":"p2"}`,
		"p2": `{"runs":[{"id":"c","pull":2},{"id":"a","pull":9}],"next":""}`,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/runs", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, pages[r.URL.Query().Get("cursor")])
	})
	mux.HandleFunc("GET /api/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "unlisted" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"id":"unlisted"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r := &replica{api: api{url: srv.URL, token: "t", hc: srv.Client()}}
	outs := []outcome{{id: "a", status: 201}, {id: "b", status: 200}, {id: "lost", status: 201}, {id: "unlisted", status: 201}, {status: 503}}
	res := LoadResult{Requests: len(outs)}
	if err := readBack(t.Context(), r, outs, &res); err != nil {
		t.Fatal(err)
	}
	if res.Stored != 4 || res.Duplicates != 2 || res.Lost != 1 || res.Unlisted != 1 {
		t.Errorf("got %d listed, %d duplicates, %d lost, %d unlisted; want 4, 2 (pull 2 and id a listed again), 1, 1", res.Stored, res.Duplicates, res.Lost, res.Unlisted)
	}
}

// TestLoadRatiosOfAResult pins the load figures derived from a result:
// the p99 ratio is with the slow connections over without them (0 when
// not measured), and the peak RSS growth is after minus before.
func TestLoadRatiosOfAResult(t *testing.T) {
	l := LoadResult{UnloadedP99: 2 * time.Millisecond, LoadedP99: 5 * time.Millisecond, HWMBefore: 30 << 20, HWMAfter: 42 << 20}
	if got := l.P99Ratio(); got != 2.5 {
		t.Errorf("got p99 ratio %.2f, want 2.5: loaded 5ms over unloaded 2ms", got)
	}
	if got := l.HWMGrowth(); got != 12<<20 {
		t.Errorf("got RSS growth %d, want %d: after minus before", got, 12<<20)
	}
	if got := (LoadResult{LoadedP99: time.Millisecond}).P99Ratio(); got != 0 {
		t.Errorf("got p99 ratio %.2f with no unloaded p99, want 0: not measured", got)
	}
}

// TestSlowConnsProbedWithinTheReadTimeout pins the slow-connection phase's
// figures, in virtual time: the probes are answered in memory, each
// unloaded one in 100 ms and each loaded one in loaded; the slow
// connections are in-memory pipes whose far end, the replica's, reads
// what they trickle and hangs up a second after the read timeout (3 s)
// has passed since it opened, within the grace they are given. The
// loaded probes were taken while every slow connection was open
// (ProbedWithin) only when they ended before the read timeout: ending at
// it, the first connections may be cut during the last probe. The p99s
// are each phase's own, and a connection the replica hung up on is not
// counted open.
func TestSlowConnsProbedWithinTheReadTimeout(t *testing.T) {
	const (
		probes      = 4
		readTimeout = 3 * time.Second
		unloaded    = 100 * time.Millisecond
	)
	for _, tc := range []struct {
		name   string
		loaded time.Duration
		within bool
	}{
		{"ended before the read timeout", readTimeout/probes - time.Millisecond, true},
		{"ended at the read timeout", readTimeout / probes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mux := http.NewServeMux()
				mux.HandleFunc("POST /api/runs", func(w http.ResponseWriter, r *http.Request) {
					var run runRequest
					if err := json.NewDecoder(r.Body).Decode(&run); err != nil {
						t.Errorf("probe: %v", err)
					}
					if run.Pull > probes {
						time.Sleep(tc.loaded)
					} else {
						time.Sleep(unloaded)
					}
					w.WriteHeader(http.StatusCreated)
				})
				hc := &http.Client{Transport: inMemory{mux}}
				dial := func(string) (net.Conn, error) {
					c, far := net.Pipe()
					go func() {
						far.SetReadDeadline(time.Now().Add(readTimeout + time.Second))
						io.Copy(io.Discard, far)
						far.Close()
					}()
					return c, nil
				}
				r := &replica{api: api{url: "http://replica.invalid", token: "api"}}
				res := LoadResult{SlowConns: 3, Probes: probes, ReadTimeout: readTimeout}
				if err := slowConns(t.Context(), r, &res, hc, dial); err != nil {
					t.Fatal(err)
				}
				if res.ProbedWithin != tc.within {
					t.Errorf("got probed within %v for %d loaded probes of %v against a read timeout of %v, want %v: within only when they ended before it",
						res.ProbedWithin, probes, tc.loaded, readTimeout, tc.within)
				}
				if res.UnloadedP99 != unloaded || res.LoadedP99 != tc.loaded {
					t.Errorf("got p99 %v unloaded and %v loaded, want %v and %v: each phase's own", res.UnloadedP99, res.LoadedP99, unloaded, tc.loaded)
				}
				if res.SlowOpen != 0 || res.SlowClosedNoReply != 3 {
					t.Errorf("got %d open, %d answered, %d closed of 3 slow connections, want 3 closed: the replica hung up on each", res.SlowOpen, res.SlowAnswered, res.SlowClosedNoReply)
				}
			})
		})
	}
}

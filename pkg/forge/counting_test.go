package forge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestEachRedirectHopIsCounted(t *testing.T) {
	sim, srv := startSim(t)
	c := newClient(t, srv, forge.Config{Token: "t1"})
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	ctx := forge.WithLane(context.Background(), forge.LaneWebhook)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/_sim/redirect/3/repos/acme/app/pulls/1", nil)
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("final status: got %d, want 200", resp.StatusCode)
	}
	if got := countOf(c, forge.LaneWebhook, http.StatusTemporaryRedirect); got != 3 {
		t.Fatalf("307 hops counted: got %d, want 3: each redirect hop is a request sent", got)
	}
	if got := countOf(c, forge.LaneWebhook, -1); got != 4 {
		t.Fatalf("requests counted: got %d, want 4: three hops and the final answer", got)
	}
	if got := sim.Requests(forgesim.Filter{Token: "t1"}); got != 4 {
		t.Fatalf("requests the simulator received: got %d, want 4 (the ground truth the counts must equal)", got)
	}
}

func TestTransportErrorsAreCountedWithCodeZero(t *testing.T) {
	// A listener that accepts and hangs up at once: the request is sent and
	// no answer comes back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	reg := prometheus.NewRegistry()
	c, err := forge.New(forge.Config{BaseURL: "http://" + ln.Addr().String() + "/", Token: "t", Next: &http.Transport{DisableKeepAlives: true}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := forge.WithLane(context.Background(), forge.LaneMergeGateSweeper)
	if _, err := c.GetPull(ctx, "acme", "app", 1); err == nil {
		t.Fatal("GetPull against a server that hangs up: got no error")
	}
	counts := c.Counts()
	if len(counts) != 1 || counts[0].Code != 0 || counts[0].N != 1 || counts[0].Lane != forge.LaneMergeGateSweeper || counts[0].Host != ln.Addr().String() {
		t.Fatalf("counts: got %+v, want one request, code 0, lane %s: a transport error is counted, never dropped", counts, forge.LaneMergeGateSweeper)
	}
	if got := counterLabels(t, reg); got != "api=REST code=error host="+ln.Addr().String()+" lane=merge-gate-sweeper: 1" {
		t.Fatalf("forge_http_requests_total: got %q, want one series with code=error: the metric labels a transport error", got)
	}
}

// counterLabels renders the series of forge_http_requests_total, one line each.
func counterLabels(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			lines = append(lines, fmt.Sprintf("%s: %v", strings.Join(labels, " "), m.GetCounter().GetValue()))
		}
	}
	return strings.Join(lines, "\n")
}

func TestLaneComesFromTheContext(t *testing.T) {
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"sweeper lane", forge.WithLane(context.Background(), forge.LaneMergeGateSweeper), forge.LaneMergeGateSweeper},
		{"webhook lane", forge.WithLane(context.Background(), forge.LaneWebhook), forge.LaneWebhook},
		{"no lane is unlaned", context.Background(), forge.LaneUnlaned},
		{"empty lane is unlaned", forge.WithLane(context.Background(), ""), forge.LaneUnlaned},
		{"innermost lane wins", forge.WithLane(forge.WithLane(context.Background(), forge.LaneAPI), forge.LaneBoardSync), forge.LaneBoardSync},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv, forge.Config{Token: "t", ETagCacheBytes: -1})
			if _, err := c.GetPull(tc.ctx, "acme", "app", 1); err != nil {
				t.Fatal(err)
			}
			want := []forge.Count{{Host: strings.TrimPrefix(srv.URL, "http://"), API: forge.APIREST, Lane: tc.want, Code: 200, N: 1}}
			if got := c.Counts(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("counts: got %+v, want %+v: the request is charged to the context's lane", got, want)
			}
		})
	}
}

// TestGraphQLIsToldFromRESTUnderAnyRoot pins that a Client tells its
// GraphQL queries from its REST requests by its own GraphQL endpoint, the
// one beside its REST root (Config.BaseURL), whatever the root's path: a
// query is counted as GraphQL and gated on the graphql budget, a REST read
// is counted as REST and gated on the core budget.
func TestGraphQLIsToldFromRESTUnderAnyRoot(t *testing.T) {
	cases := []struct {
		name, root string // root: the REST root's path
		graphql    string // the GraphQL endpoint's path
	}{
		{"GitHub's root: /graphql", "/", "/graphql"},
		{"an Enterprise server's /api/v3/: /api/graphql", "/api/v3/", "/api/graphql"},
		{"a root under a path prefix: the prefix's /graphql", "/github/", "/github/graphql"},
	}
	refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := forgesim.New(forgesim.WithBudget(2))
			mustSim(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
			mux := http.NewServeMux()
			mux.Handle(tc.root, http.StripPrefix(strings.TrimSuffix(tc.root, "/"), sim))
			mux.Handle(tc.graphql, http.StripPrefix(strings.TrimSuffix(tc.graphql, "/graphql"), sim))
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			c, err := forge.New(forge.Config{BaseURL: srv.URL + tc.root, Token: "t", Next: srv.Client().Transport, ETagCacheBytes: -1})
			mustSim(t, err)
			ctx := laneCtx(forge.LaneMergeGateSweeper)
			if _, err := c.GetPull(ctx, "acme", "app", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PullStates(ctx, refs); err != nil {
				t.Fatal(err)
			}
			host := strings.TrimPrefix(srv.URL, "http://")
			want := fmt.Sprint([]forge.Count{
				{Host: host, API: forge.APIGraphQL, Lane: forge.LaneMergeGateSweeper, Code: 200, N: 1, Points: 1},
				{Host: host, API: forge.APIREST, Lane: forge.LaneMergeGateSweeper, Code: 200, N: 1},
			})
			if got := fmt.Sprint(c.Counts()); got != want {
				t.Fatalf("counts: got %s, want %s: the query at %s is GraphQL, the read REST", got, want, tc.graphql)
			}
			// Spend the rest of the graphql budget of 2; core has 1 left.
			if _, err := c.PullStates(ctx, refs); err != nil {
				t.Fatal(err)
			}
			var rl *forge.RateLimitError
			if _, err := c.PullStates(ctx, refs); !errors.As(err, &rl) || rl.Sent || rl.Resource != "graphql" {
				t.Fatalf("a query with the graphql budget spent: got %v, want a *RateLimitError held back on graphql: queries are gated on their own budget", err)
			}
			if _, err := c.GetPull(ctx, "acme", "app", 1); err != nil {
				t.Fatalf("a REST read with core budget left: %v, want it sent: a spent graphql budget holds no REST read", err)
			}
		})
	}
}

// TestCountsEqualTheSimulatorsUnderConcurrency is docs/design.md, decision 6: the
// cost is measured. A mixed workload on several goroutines — reads, writes,
// 404s, 304s, GraphQL, redirects, in several lanes — is counted by the
// transport exactly as the simulator counts what it received.
func TestCountsEqualTheSimulatorsUnderConcurrency(t *testing.T) {
	sim, srv := startSim(t)
	reg := prometheus.NewRegistry()
	c := newClient(t, srv, forge.Config{Token: "mixed", Registerer: reg})
	for n := 1; n <= 8; n++ {
		if err := sim.SeedPull("acme", "app", n, fmt.Sprint("sha", n), "open"); err != nil {
			t.Fatal(err)
		}
	}
	lanes := []string{forge.LaneMergeGateSweeper, forge.LaneWebhook, forge.LaneAPI, ""}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			ctx := context.Background()
			if lane := lanes[g%len(lanes)]; lane != "" {
				ctx = forge.WithLane(ctx, lane)
			}
			n := g + 1
			for i := range 12 {
				var err error
				switch i % 6 {
				case 0, 1: // the second read of a pull is a 304
					_, err = c.GetPull(ctx, "acme", "app", n)
				case 2:
					err = c.CreateStatus(ctx, "acme", "app", fmt.Sprint("sha", n), forge.Status{Context: "ci", State: "success"})
				case 3:
					_, err = c.CombinedStatus(ctx, "acme", "app", fmt.Sprint("sha", n))
				case 4:
					if _, err = c.GetPull(ctx, "acme", "app", 100+n); errors.Is(err, forge.ErrNotFound) {
						err = nil
					}
				case 5:
					err = post(ctx, c, srv.URL+"/_sim/redirect/2/graphql", `{"query":"{ rateLimit { remaining } }"}`)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var byStatus = map[int]int64{}
	for _, k := range c.Counts() {
		byStatus[k.Code] += k.N
	}
	simByStatus := map[int]int64{}
	for _, rc := range sim.Stats().Requests {
		if rc.Token == "mixed" {
			simByStatus[rc.Status] += rc.Count
		}
	}
	if fmt.Sprint(byStatus) != fmt.Sprint(simByStatus) {
		t.Fatalf("transport counts by status: got %v, want the simulator's %v", byStatus, simByStatus)
	}
	if byStatus[http.StatusNotModified] == 0 || byStatus[http.StatusNotFound] == 0 || byStatus[http.StatusTemporaryRedirect] == 0 || byStatus[http.StatusCreated] == 0 {
		t.Fatalf("workload: got %v, want 304s, 404s, 307s and 201s among the answers", byStatus)
	}
	var total int64
	for _, n := range byStatus {
		total += n
	}
	if got := counterSum(t, reg); int64(got) != total {
		t.Fatalf("forge_http_requests_total: got %v, want %d: Prometheus sees what Counts sees", got, total)
	}
}

func post(ctx context.Context, c *forge.Client, u, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", u, resp.Status)
	}
	return nil
}

// counterSum is the sum of forge_http_requests_total over its labels.
func counterSum(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "forge_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestClientsShareARegisterer(t *testing.T) {
	_, srv := startSim(t)
	reg := prometheus.NewRegistry()
	newClient(t, srv, forge.Config{Token: "a", Registerer: reg})
	newClient(t, srv, forge.Config{Token: "b", Registerer: reg})
	// newClient fails the test when the second registration is refused.
}

package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// failingGraphQL answers every GraphQL query 502 while on, as a gateway in
// front of a failing forge does, and passes everything else to next.
type failingGraphQL struct {
	next http.RoundTripper
	on   atomic.Bool
}

func (f *failingGraphQL) RoundTrip(req *http.Request) (*http.Response, error) {
	if !f.on.Load() || !strings.HasSuffix(req.URL.Path, "/graphql") {
		return f.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/html"}}, Body: io.NopCloser(strings.NewReader("<html>502 Bad Gateway</html>")), Request: req}, nil
}

// TestPassSuccessMeansForgeSuccess pins, in virtual time, that a sweep
// pass whose every forge read failed is not a success: while every GraphQL
// answer is a 502, iterion_net_last_success_timestamp_seconds does not
// move, iterion_net_forge_error_ratio is 1, and the passes back off
// (two intervals, then four, then eight) instead of asking every interval;
// once the forge answers again, a pass completes and the ratio is 0.
func TestPassSuccessMeansForgeSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 3)
		fg := &failingGraphQL{next: next}
		var reg *prometheus.Registry
		startReplicas(t, c, fg, 1, time.Minute, func(cfg *server.Config) { reg = cfg.Registry })
		r := c.replicas[0]
		defer r.stop()
		sweeper := server.MergeGateSweeper().Name
		time.Sleep(time.Minute + time.Second) // the first pass, complete
		synctest.Wait()
		last := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", sweeper).GetGauge().GetValue()
		if last == 0 {
			t.Fatal("no complete pass before the forge fails")
		}

		fg.on.Store(true)
		c.sim.ResetStats()
		before := len(passesOf(c))
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		if got := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", sweeper).GetGauge().GetValue(); got != last {
			t.Errorf("last success while every GraphQL answer is a 502: got %v, want %v unmoved: a pass with no forge answer is no success", got, last)
		}
		if got := metric(t, reg, "iterion_net_forge_error_ratio", "lease", sweeper).GetGauge().GetValue(); got != 1 {
			t.Errorf("iterion_net_forge_error_ratio while the forge fails: got %v, want 1", got)
		}
		failed := passesOf(c)[before:]
		for _, p := range failed {
			if p.Complete {
				t.Errorf("pass %d at %v: complete, want incomplete: every forge read failed", p.Pass, p.At)
			}
		}
		// Passes at 2m, then 2, 4 and 8 intervals later: 2m, 4m, 8m, 16m,
		// where one a minute would make 15.
		if len(failed) != 4 {
			t.Errorf("passes in 15 minutes of 502s: got %d, want 4 (at 2m, 4m, 8m and 16m): 5xx answers back off between passes", len(failed))
		}
		if n := c.sim.Requests(forgesim.Filter{}); n != 0 {
			t.Errorf("simulator requests while the gateway fails: got %d, want 0", n)
		}

		fg.on.Store(false)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", sweeper).GetGauge().GetValue(); got <= last {
			t.Errorf("last success after the forge recovered: got %v, want after %v", got, last)
		}
		if got := metric(t, reg, "iterion_net_forge_error_ratio", "lease", sweeper).GetGauge().GetValue(); got != 0 {
			t.Errorf("iterion_net_forge_error_ratio after the forge recovered: got %v, want 0", got)
		}
	})
}

// passesOf is the sweep passes the cluster's replicas reported.
func passesOf(c *cluster) []server.SweepPass {
	_, passes := c.tl.snapshot()
	return passes
}

// statelessGraphQL, while on, rewrites every GraphQL answer next gives so
// that each open pull request's state is null, an answer GitHub's schema
// never gives (PullRequest.state is PullRequestState!), and passes
// everything else as it is.
type statelessGraphQL struct {
	next http.RoundTripper
	on   atomic.Bool
}

func (h *statelessGraphQL) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err != nil || !h.on.Load() || !strings.HasSuffix(req.URL.Path, "/graphql") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = bytes.ReplaceAll(body, []byte(`"state":"OPEN"`), []byte(`"state":null`))
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// TestSweepLosesNoRunToAMalformedAnswer pins that an answer missing what
// GitHub's schema requires is a failed read, not a decision: while every
// pull request in the GraphQL answers has a null state, the sweeper's
// passes settle none of the 3 open runs (read as closed, each would be
// settled and never repaired) and publish nothing; once the answers are
// whole, the next term's first pass publishes each run's verdict.
func TestSweepLosesNoRunToAMalformedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 3)
		hg := &statelessGraphQL{next: next}
		hg.on.Store(true)
		startReplicas(t, c, hg, 1, time.Minute, nil)
		defer c.stopAll()
		time.Sleep(3*time.Minute + 30*time.Second)
		synctest.Wait()
		passes := passesOf(c)
		if len(passes) == 0 {
			t.Fatal("no pass in 3 minutes")
		}
		for _, p := range passes {
			if p.ForgeReads == 0 || p.ForgeErrors != p.ForgeReads || p.Complete {
				t.Errorf("pass %d: %d forge reads, %d failed, complete %v; want every read failed and the pass incomplete: a malformed answer is a failed read", p.Pass, p.ForgeReads, p.ForgeErrors, p.Complete)
			}
		}
		runs, err := c.runs.Unsettled(context.Background(), time.Time{}, gaterun.Cursor{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 3 {
			t.Errorf("unsettled runs after %d passes of malformed answers: got %d, want 3: a pull request without a state is not closed", len(passes), len(runs))
		}
		if posts := c.sim.Requests(forgesim.Filter{Route: statusRoute}); posts != 0 {
			t.Errorf("statuses published from malformed answers: got %d, want 0", posts)
		}

		// Three failed passes in a row end the term, and the replica waits
		// three intervals before it campaigns again (stallPasses).
		hg.on.Store(false)
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		if posts := c.sim.Requests(forgesim.Filter{Route: statusRoute, Status: http.StatusCreated}); posts != 3 {
			t.Errorf("statuses published once the answers are whole: got %d, want 3: every run's verdict repaired", posts)
		}
	})
}

package harness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// TestSweeperFiguresReadTheServersPassMetrics pins the harness's reading of
// a replica's /metrics against the server's own: after a sweep pass,
// api.sweeper finds it in iterion_net_pass_duration_seconds under the
// sweeper's lease label, and its terms and step-downs in the lease's
// metrics, so the scale scenario's pass times cannot go to zero, nor a
// handover go unseen, when a metric or label is renamed on one side only.
func TestSweeperFiguresReadTheServersPassMetrics(t *testing.T) {
	sim := httptest.NewServer(forgesim.New())
	defer sim.Close()
	fc, err := forge.New(forge.Config{BaseURL: sim.URL + "/", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	passed := make(chan struct{}, 1)
	srv, err := server.New(server.Config{
		Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "api",
		// An interval long enough that a loaded machine does not miss a
		// renewal's deadline (TTL/6 before the 3-interval expiry): a
		// 50 ms interval stepped down once by its deadline beside other
		// work (CI run with a helper testing), failing the "one term".
		SweepInterval: 500 * time.Millisecond, ForgeMinute: 500 * time.Millisecond, // GitHub's minute compressed to the interval
		OnSweep: func(server.SweepPass) {
			select {
			case passed <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()
	select {
	case <-passed:
	case <-ctx.Done():
		t.Fatal("got no sweep pass within a minute, want one every 500ms once elected")
	}

	f, err := api{url: hs.URL, token: "api", hc: http.DefaultClient}.sweeper(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.passes == 0 {
		t.Errorf("got %d sweeper passes from /metrics after a pass, want at least 1: the harness reads the server's pass metric and its lease label", f.passes)
	}
	a := api{url: hs.URL, token: "api", hc: http.DefaultClient}
	sweeperLease := server.MergeGateSweeper().Name
	if terms, downs, err := a.leaseTurns(ctx, sweeperLease); err != nil || terms[0] != 1 || len(downs[0]) != 0 {
		t.Errorf("got %d sweeper terms and step-downs %v (%v) while in its first term, want 1 and none: the cost and scale scenarios tell a handover by them", terms, downs, err)
	}
	// The term steps down when Run's context ends; /metrics still answers.
	cancel()
	<-done
	done <- nil // for the deferred receive
	terms, downs, err := a.leaseTurns(context.Background(), sweeperLease)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range downs[0] {
		n += d
	}
	if terms[0] != 1 || n != 1 {
		t.Errorf("got %d sweeper terms and step-downs %v after Run ended, want 1 and one: the harness reads lease_terms_started_total and lease_step_downs_total under the lease's label", terms[0], downs[0])
	}
}

// TestHarnessTriesItsOwnForgeRequestsAgainOnAServerError pins forgeJSON:
// GitHub's 10 s timeout answers a slow REST request 502 (the simulator's
// latency model does too), so the harness's own status reads try again,
// forgeTries times in all, rather than end a measurement.
func TestHarnessTriesItsOwnForgeRequestsAgainOnAServerError(t *testing.T) {
	for _, c := range []struct {
		fails int
		want  string
		why   string
	}{
		{forgeTries - 1, "success", "502s short of forgeTries: the last try reads the status"},
		{forgeTries, "", "forgeTries 502s: the read fails, as a request error"},
	} {
		var sent atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sent.Add(1) <= int64(c.fails) {
				http.Error(w, `{"message":"Server Error"}`, http.StatusBadGateway)
				return
			}
			w.Write([]byte(`{"statuses":[{"context":"ctx","state":"success"}]}`))
		}))
		st, err := sim{url: srv.URL, hc: newHTTPClient()}.statusOf(context.Background(), "acme/app", "sha", "ctx")
		srv.Close()
		if st != c.want || (err != nil) != (c.want == "") || (err != nil && !errors.Is(err, ErrRequest)) || sent.Load() != int64(min(c.fails+1, forgeTries)) {
			t.Errorf("%d 502s: got %q, %v after %d requests, want %q: %s", c.fails, st, err, sent.Load(), c.want, c.why)
		}
	}
}

package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leasecut"
	"iterion.dev/iterion/pkg/server"
)

// timeline records what the replicas of one test report.
type timeline struct {
	mu     sync.Mutex
	events []lease.Event
	passes []server.SweepPass
}

func (tl *timeline) onEvent(e lease.Event) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.events = append(tl.events, e)
}

func (tl *timeline) onSweep(p server.SweepPass) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.passes = append(tl.passes, p)
}

func (tl *timeline) snapshot() ([]lease.Event, []server.SweepPass) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.events), slices.Clone(tl.passes)
}

// replica is one in-process Server with its own forge token and registry.
type replica struct {
	owner, token string
	forge        *forge.Client
	app          *forge.AppClient // App mode (startAppReplicas); nil otherwise
	handler      http.Handler     // the replica's HTTP API and pages
	srv          *server.Server
	stop         func() // cancels Run and waits for it
}

// cluster is n replicas on one lease store, one run store and one
// simulator, inside a synctest bubble.
type cluster struct {
	sim      *forgesim.Sim
	leases   *lease.MemoryStore
	runs     *gaterun.MemoryStore
	tl       *timeline
	replicas []*replica
	// cmp is what startReplicas starts the next replicas as: the zero
	// value, production replicas, unless a test compares.
	cmp server.Comparison
}

// newCluster returns an empty cluster on a fresh simulator served over a
// pipeNet (stopped at cleanup), with pulls acme/app#1..pulls open at heads
// sha1.. and a success run for each; next reaches the simulator. Call it
// inside a synctest bubble.
func newCluster(t *testing.T, pulls int) (c *cluster, next http.RoundTripper) {
	t.Helper()
	c = &cluster{sim: forgesim.New(), leases: lease.NewMemoryStore(), runs: gaterun.NewMemoryStore(), tl: &timeline{}}
	for pull := 1; pull <= pulls; pull++ {
		sha := fmt.Sprintf("sha%d", pull)
		if err := c.sim.SeedPull("acme", "app", pull, sha, "open"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.runs.Put(context.Background(), gateRun(pull, sha, gaterun.VerdictSuccess), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	tr, stopSim := serveSimOnPipe(c.sim)
	t.Cleanup(stopSim)
	return c, tr
}

// startReplicas starts n Servers (owners replica-1..n) sweeping every
// interval, each forge client on its own token so the simulator tells
// them apart.
func startReplicas(t *testing.T, c *cluster, next http.RoundTripper, n int, interval time.Duration, mod func(*server.Config)) {
	t.Helper()
	for i := 1; i <= n; i++ {
		r := &replica{owner: fmt.Sprintf("replica-%d", i), token: fmt.Sprintf("token-%d", i)}
		reg := prometheus.NewRegistry()
		r.forge = newForge(t, "http://sim/", next, r.token, reg, nil)
		cfg := server.Config{Runs: c.runs, Leases: c.leases, Forge: r.forge, APIToken: "a", WebhookSecret: "w",
			Owner: r.owner, SweepInterval: interval, Registry: reg, OnLeaseEvent: c.tl.onEvent, OnSweep: c.tl.onSweep}
		c.start(t, r, cfg, mod)
	}
}

// stopAll stops every replica of c.
func (c *cluster) stopAll() {
	for _, r := range c.replicas {
		r.stop()
	}
}

// start builds r's Server from cfg as mod (nil: none) adjusts it, as
// c.cmp says, runs it, and adds r to c; r.stop stops it.
func (c *cluster) start(t *testing.T, r *replica, cfg server.Config, mod func(*server.Config)) {
	t.Helper()
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.NewForComparison(cfg, c.cmp)
	if err != nil {
		t.Fatalf("server.NewForComparison: %v", err)
	}
	r.handler, r.srv = srv.Handler(), srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil) }()
	r.stop = sync.OnceFunc(func() { // a second stop must not wait forever on done
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run = %v, want nil after its context is done", r.owner, err)
		}
	})
	c.replicas = append(c.replicas, r)
}

// tokensSeen are the tokens the simulator received requests from.
func tokensSeen(sim *forgesim.Sim) []string {
	var out []string
	for _, rc := range sim.Stats().Requests {
		if !slices.Contains(out, rc.Token) {
			out = append(out, rc.Token)
		}
	}
	slices.Sort(out)
	return out
}

// TestOnlyTheElectedReplicaSweeps pins the lease's consequence (docs/design.md): with two and
// then five replicas on one store and one forge, exactly one is elected and
// only it sends sweeper requests; the simulator's server-side counts and
// every replica's transport counts agree.
func TestOnlyTheElectedReplicaSweeps(t *testing.T) {
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprintf("%d replicas", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, tr := newCluster(t, 3)
				sim := c.sim
				startReplicas(t, c, tr, n, time.Minute, nil)
				time.Sleep(10*time.Minute + time.Second)
				synctest.Wait()
				for _, r := range c.replicas {
					r.stop()
				}

				events, passes := c.tl.snapshot()
				var elected []string
				for _, e := range events {
					if e.Kind == lease.Elected {
						elected = append(elected, e.Owner)
					}
				}
				if len(elected) != 1 {
					t.Fatalf("elected %v, want exactly one owner for the whole run: the lease elects one replica and is sticky", elected)
				}
				leader := elected[0]
				if len(passes) < 9 {
					t.Errorf("got %d passes in 10 minutes, want at least 9: the leader sweeps every interval", len(passes))
				}
				for _, p := range passes {
					if p.Owner != leader {
						t.Errorf("pass by %s, want only the leader %s: only the elected replica sweeps", p.Owner, leader)
					}
				}
				want := []string{"token-" + strings.TrimPrefix(leader, "replica-")}
				if got := tokensSeen(sim); !slices.Equal(got, want) {
					t.Errorf("simulator saw tokens %v, want %v: only the elected replica sends requests", got, want)
				}
				for _, r := range c.replicas {
					got := lanes(r.forge)
					if r.owner != leader {
						if len(got) != 0 {
							t.Errorf("%s sent %v, want nothing: a follower sends no sweeper requests", r.owner, got)
						}
						continue
					}
					simN := sim.Requests(forgesim.Filter{Token: r.token})
					if len(got) != 1 || got[forge.LaneMergeGateSweeper] != simN || simN == 0 {
						t.Errorf("leader's transport counts %v, simulator's %d, want all on lane %s and equal", got, simN, forge.LaneMergeGateSweeper)
					}
				}
				if hs, _ := c.leases.Holders(context.Background()); len(hs) != 0 {
					t.Errorf("holders after shutdown %v, want none: a stopped leader releases its lease", hs)
				}
			})
		})
	}
}

// TestTakeoverAfterTheLeaderStops pins the takeover bound after a clean
// stop (docs/design.md, consequences): a follower is elected within one retry (one
// interval) of the leader's release, and its first pass, a deep one, comes
// one interval after its election.
func TestTakeoverAfterTheLeaderStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr := newCluster(t, 0)
		startReplicas(t, c, tr, 2, time.Minute, nil)
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		events, _ := c.tl.snapshot()
		if len(events) == 0 || events[0].Kind != lease.Elected {
			t.Fatalf("events %v, want an election first", events)
		}
		leader := events[0].Owner
		var stopped time.Time
		for _, r := range c.replicas {
			if r.owner == leader {
				r.stop()
				stopped = time.Now()
			}
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		for _, r := range c.replicas {
			if r.owner != leader {
				r.stop()
			}
		}
		events, passes := c.tl.snapshot()
		var next lease.Event
		for _, e := range events {
			if e.Kind == lease.Elected && e.Owner != leader {
				next = e
				break
			}
		}
		if next.Owner == "" || next.At.Sub(stopped) > time.Minute {
			t.Fatalf("successor %q elected %v after the leader stopped, want within one retry (1m)", next.Owner, next.At.Sub(stopped))
		}
		var first server.SweepPass
		for _, p := range passes {
			if p.Owner == next.Owner {
				first = p
				break
			}
		}
		if first.Pass != 1 || !first.Deep || first.At.Sub(next.At) != time.Minute {
			t.Errorf("successor's first pass %+v, %v after its election; want pass 1, deep, one interval after", first, first.At.Sub(next.At))
		}
	})
}

// TestNoLeaseSweepsOnEveryReplica pins what --no-lease is for: every
// replica sweeps without a lease, so the cost scales with replicas.
func TestNoLeaseSweepsOnEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr := newCluster(t, 1)
		c.cmp.NoLease = true
		startReplicas(t, c, tr, 3, time.Minute, nil)
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		for _, r := range c.replicas {
			r.stop()
		}
		if got := tokensSeen(c.sim); len(got) != 3 {
			t.Errorf("simulator saw tokens %v, want all 3: without a lease every replica sweeps", got)
		}
		if hs, _ := c.leases.Holders(context.Background()); len(hs) != 0 {
			t.Errorf("holders %v, want none: --no-lease takes no lease", hs)
		}
	})
}

// TestGracefulShutdown pins the order of a stop (SIGTERM in iterion serve):
// requests are refused, the sweeper's term ends and its lease is released
// (the store shows no holder), the forge client writes the partial hourly
// line, and Run returns nil.
func TestGracefulShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr := newCluster(t, 1)
		runs, leases := c.runs, c.leases
		logger, logs := textLogger()
		fc := newForge(t, "http://sim/", tr, "tok", nil, logger)
		tl := &timeline{}
		srv, err := server.New(server.Config{Runs: runs, Leases: leases, Forge: fc, APIToken: "a", WebhookSecret: "w",
			Owner: "replica-1", Logger: logger, OnLeaseEvent: tl.onEvent, OnSweep: tl.onSweep})
		if err != nil {
			t.Fatal(err)
		}
		ln := newPipeNet()
		client := &http.Client{Transport: &http.Transport{DialContext: ln.Dial}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx, ln) }()
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if resp, err := client.Get("http://replica/healthz"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz while running = %v, %v, want 200", resp, err)
		} else {
			resp.Body.Close()
		}
		if hs, _ := leases.Holders(context.Background()); len(hs) != 1 || hs[0].Owner != "replica-1" {
			t.Fatalf("holders %v, want replica-1 holding the sweeper's lease", hs)
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after a stop", err)
		}
		client.Transport.(*http.Transport).CloseIdleConnections()
		if _, err := client.Get("http://replica/healthz"); err == nil {
			t.Errorf("GET /healthz after the stop succeeded, want refused: a stopped server takes no requests")
		}
		if hs, _ := leases.Holders(context.Background()); len(hs) != 0 {
			t.Errorf("holders after the stop %v, want none: the term ends and the lease is released", hs)
		}
		events, passes := tl.snapshot()
		if len(passes) == 0 || events[len(events)-1].Kind != lease.Released {
			t.Errorf("events %v, passes %d, want the term to end with a release after at least one pass", events, len(passes))
		}
		out := logs.String()
		stopAt := strings.Index(out, "stop taking requests")
		releasedAt := strings.Index(out, "released")
		hourAt := strings.Index(out, "forge HTTP:")
		if stopAt < 0 || releasedAt < stopAt || hourAt < releasedAt || !strings.Contains(out[hourAt:], "partial hour") {
			t.Errorf("log:\n%s\nwant, in order: stop taking requests, the lease released, the partial hourly forge line", out)
		}
	})
}

// TestLogsNameTheOwnerOnceAndTheLeaseAsLease pins the logs' vocabulary:
// every line a replica's server, sweeper, board sync and leases write
// carries its owner exactly once, and the lines about an elected net name
// its lease under the key lease, never net.
func TestLogsNameTheOwnerOnceAndTheLeaseAsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr := newCluster(t, 1)
		logger, logs := textLogger()
		startReplicas(t, c, tr, 1, time.Minute, func(cfg *server.Config) {
			cfg.Logger = logger
			cfg.BoardRepos = []string{"acme/app"}
			cfg.WebhookSecret = "" // its warning is a line of the replica's too
		})
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		c.replicas[0].stop()

		if bad := logs.NotOnce("owner=replica-1"); len(bad) > 0 {
			t.Errorf("log lines without owner=replica-1 exactly once: %q, want none: the owner is attached once per logger", bad)
		}
		out := logs.String()
		for _, want := range []string{"webhooks are off", "sweep pass", "board sync pass", "lease=" + server.MergeGateSweeper().Name, "lease=" + server.ForgeBoardSync().Name} {
			if !strings.Contains(out, want) {
				t.Errorf("log:\n%s\nwant a line with %q", out, want)
			}
		}
		if strings.Contains(out, " net=") {
			t.Errorf("log:\n%s\nwant no net= key: a lease's name is logged as lease", out)
		}
	})
}

// TestPartitionedLeaderStopsSweepingBeforeTheSuccessorStarts pins the
// fail-closed hand-over at the server level: a leader cut off from the
// lease store (a partition, or a crash as the store sees it) stops sweeping
// before a successor is elected, so their sweeps never overlap, and the
// successor takes over within TTL + retry (four intervals, docs/design.md).
func TestPartitionedLeaderStopsSweepingBeforeTheSuccessorStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tr := newCluster(t, 2)
		views := map[string]leasecut.Store{}
		n := 0
		startReplicas(t, c, tr, 3, time.Minute, func(cfg *server.Config) {
			n++
			v := leasecut.New(c.leases)
			views[fmt.Sprintf("replica-%d", n)] = v
			cfg.Leases = v
		})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		events, _ := c.tl.snapshot()
		leader := events[0].Owner
		views[leader].Cut()
		cutAt := time.Now()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		for _, r := range c.replicas {
			r.stop()
		}

		events, passes := c.tl.snapshot()
		var stepDown, next lease.Event
		for _, e := range events {
			switch {
			case e.Kind == lease.SteppedDown && e.Owner == leader && stepDown.Owner == "":
				stepDown = e
			case e.Kind == lease.Elected && e.Owner != leader && next.Owner == "":
				next = e
			}
		}
		if stepDown.Owner == "" || next.Owner == "" {
			t.Fatalf("events %v, want the partitioned leader to step down and another replica to be elected", events)
		}
		if !stepDown.At.Before(next.At) {
			t.Errorf("leader stepped down at %v, successor elected at %v: want the step-down first (fail-closed)", stepDown.At.Sub(cutAt), next.At.Sub(cutAt))
		}
		if d := next.At.Sub(cutAt); d > 4*time.Minute {
			t.Errorf("successor elected %v after the partition, want within TTL + retry = 4m", d)
		}
		for _, p := range passes {
			if p.Owner == leader && !p.At.Before(stepDown.At) {
				t.Errorf("partitioned leader swept at %v, after its step-down at %v: a stepped-down replica does not sweep", p.At.Sub(cutAt), stepDown.At.Sub(cutAt))
			}
			if p.Owner != leader && p.At.Before(next.At) {
				t.Errorf("%s swept at %v before its election at %v", p.Owner, p.At.Sub(cutAt), next.At.Sub(cutAt))
			}
		}
	})
}

// stalledForge is a forge that never answers and ignores cancellation, as a
// hung connection can: RoundTrip returns only once unstall is closed.
type stalledForge struct{ unstall chan struct{} }

func (f stalledForge) RoundTrip(*http.Request) (*http.Response, error) {
	<-f.unstall
	return nil, errors.New("test: stalled forge gave up")
}

// TestHealthzFailsWhileWorkOutlivesItsTerm pins the stuck-holder fault: a
// sweeper stuck in a forge call that ignores cancellation keeps running
// after its term ended (a possible overlap with a successor), and /healthz
// answers 503 once it has outlived its term by TTL/6, so an orchestrator
// restarts the replica; it answers 200 again once the work returns.
func TestHealthzFailsWhileWorkOutlivesItsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCluster(t, 1)
		stall := stalledForge{unstall: make(chan struct{})}
		view := leasecut.New(c.leases)
		srv, err := server.New(server.Config{Runs: c.runs, Leases: view, Forge: newForge(t, "http://sim/", stall, "tok", nil, nil),
			APIToken: "a", Owner: "replica-1", SweepInterval: time.Minute, OnLeaseEvent: c.tl.onEvent})
		if err != nil {
			t.Fatal(err)
		}
		healthz := func() int {
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			return rec.Code
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx, nil) }()
		time.Sleep(time.Minute + time.Second) // the first pass is stuck in GET pull
		synctest.Wait()
		if code := healthz(); code != http.StatusOK {
			t.Errorf("/healthz during the term = %d, want 200: work inside its term is healthy", code)
		}
		view.Cut() // renewals fail: the term ends fail-closed
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		events, _ := c.tl.snapshot()
		if last := events[len(events)-1]; last.Kind != lease.SteppedDown {
			t.Fatalf("events %v, want the term to have ended", events)
		}
		if code := healthz(); code != http.StatusServiceUnavailable {
			t.Errorf("/healthz with work stuck past its term = %d, want 503: a stuck holder is unhealthy", code)
		}
		close(stall.unstall)
		synctest.Wait()
		if code := healthz(); code != http.StatusOK {
			t.Errorf("/healthz after the work returned = %d, want 200", code)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}

package demo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leasecut"
	"iterion.dev/iterion/pkg/server"
)

// replica is one pkg/server instance of the demo, with its own forge client
// (whose token is its name) and metrics registry.
type replica struct {
	store   leasecut.Store // its view of the shared lease store, cut by a crash
	crashed atomic.Bool    // set by crash: a dead process reports nothing more
	cancel  context.CancelFunc
	done    chan struct{}
}

// stop ends the replica cleanly: its term ends and its lease is released.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// crash cuts the replica from the lease store first, then stops it: it
// sends nothing more, and its lease is left to expire. Its lease events
// from the cut on are not recorded: a crashed process reports no
// step-down, though the demo's replica, stopped after the cut, ends its
// term as a cancelled one.
func (r *replica) crash() {
	r.crashed.Store(true)
	r.store.Cut()
	r.stop()
}

func stopAll(rs []*replica) {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(r.stop)
	}
	wg.Wait()
}

// startAll starts one replica per name.
func (d *demo) startAll(ctx context.Context, noLease bool) ([]*replica, error) {
	var rs []*replica
	for _, name := range d.names {
		r, err := d.start(ctx, name, noLease)
		if err != nil {
			stopAll(rs)
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func (d *demo) start(ctx context.Context, name string, noLease bool) (*replica, error) {
	reg := prometheus.NewRegistry()
	fc, err := forge.New(forge.Config{BaseURL: d.simURL + "/", Token: name, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("demo: forge client of %s: %w", name, err)
	}
	r := &replica{store: leasecut.New(d.leases), done: make(chan struct{})}
	srv, err := server.NewForComparison(server.Config{
		Runs:          d.runs,
		Leases:        r.store,
		Forge:         fc,
		APIToken:      "demo",
		WebhookSecret: "demo",
		Owner:         name,
		SweepInterval: d.cfg.Interval,
		ForgeMinute:   d.cfg.Interval, // the simulator's minute (WithMinute)
		BoardRepos:    []string{demoOwner + "/" + demoRepo},
		BoardInterval: d.cfg.Interval,
		Registry:      reg,
		OnLeaseEvent: func(ev lease.Event) {
			if !r.crashed.Load() {
				d.leaseEvent(ev)
			}
		},
	}, server.Comparison{NoLease: noLease}) // phase 1 shows the design the lease replaced
	if err != nil {
		fc.Close()
		return nil, fmt.Errorf("demo: server %s: %w", name, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() {
		defer close(r.done)
		srv.Run(rctx, nil)
	}()
	return r, nil
}

// demoRepo is the repository of the seeded pull requests and issues, and
// the board's one repository.
const (
	demoOwner = "acme"
	demoRepo  = "app"
)

// seed opens runs pull requests on the simulator, each with a gating run
// whose success verdict its commit status already shows, so every sweep
// pass re-reads them all and writes nothing; and issues issues after them,
// which the board lists with the pull requests.
func seed(ctx context.Context, sim *forgesim.Sim, runStore gaterun.Store, runs, issues int) error {
	for i := runs + 1; i <= runs+issues; i++ {
		is := forgesim.Issue{Number: i, Title: fmt.Sprintf("demo issue %d", i), State: "open", Labels: []string{"demo"}}
		if err := sim.SeedIssue(demoOwner, demoRepo, is); err != nil {
			return fmt.Errorf("demo: seed issue %d: %w", i, err)
		}
	}
	now := time.Now()
	for i := 1; i <= runs; i++ {
		sha := fmt.Sprintf("%040x", uint64(i)*0x9e3779b97f4a7c15)
		if err := sim.SeedPull(demoOwner, demoRepo, i, sha, "open"); err != nil {
			return fmt.Errorf("demo: seed pull %d: %w", i, err)
		}
		if err := sim.SetStatus(demoOwner, demoRepo, sha, forgesim.Status{Context: gaterun.DefaultContext, State: "success"}); err != nil {
			return fmt.Errorf("demo: seed status %d: %w", i, err)
		}
		run := gaterun.Run{
			ID: gaterun.ID("github.com", demoOwner+"/"+demoRepo, i, sha), Host: "github.com",
			Repo: demoOwner + "/" + demoRepo, Pull: i, HeadSHA: sha, Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess,
		}
		if _, err := runStore.Put(ctx, run, now); err != nil {
			return fmt.Errorf("demo: seed run %d: %w", i, err)
		}
	}
	return nil
}

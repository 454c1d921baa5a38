// App mode: each installation's last complete sweep, recorded in the run
// store so that every replica's installations view shows it.

package server

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// sweepRecorder writes the installations' complete sweep passes to the run
// store in the background, so a pass never waits on the store. Passes that
// complete while a write is in flight are batched into the next one, and
// a later pass of an installation replaces its pending one: at most one
// document write per installation per pass, and a store call per
// recordBatch sweeps of a batch. Safe for concurrent use.
type sweepRecorder struct {
	store   gaterun.InstallationStore
	app     *forge.AppClient
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	pending map[int64]gaterun.InstallationSweep
	kick    chan struct{} // holds a token while pending has work
}

// newSweepRecorder is cfg's recorder: nil without an App, or when
// cfg.Runs keeps no installation records (not a gaterun.InstallationStore).
func newSweepRecorder(cfg Config, log *slog.Logger) *sweepRecorder {
	store, ok := cfg.Runs.(gaterun.InstallationStore)
	if !ok || cfg.App == nil {
		return nil
	}
	return &sweepRecorder{store: store, app: cfg.App, timeout: cfg.StoreTimeout, log: log,
		pending: map[int64]gaterun.InstallationSweep{}, kick: make(chan struct{}, 1)}
}

// start runs the recorder in nets until ctx is done; a nil recorder does
// nothing.
func (r *sweepRecorder) start(ctx context.Context, nets *sync.WaitGroup) {
	if r != nil {
		nets.Go(func() { r.run(ctx) })
	}
}

// note queues p's sweep when p is one installation's complete pass, with
// the installation's budgets as this replica's App client knows them now
// and its uncovered runs.
func (r *sweepRecorder) note(p SweepPass, uncovered int) {
	if p.Installation == 0 || !p.Complete {
		return
	}
	sw := gaterun.InstallationSweep{Installation: p.Installation, At: p.At, Owner: p.Owner, Budgets: r.app.Budgets(p.Installation), Uncovered: uncovered}
	r.mu.Lock()
	if old, ok := r.pending[sw.Installation]; !ok || sw.At.After(old.At) {
		r.pending[sw.Installation] = sw
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run writes the pending sweeps each time there are some, until ctx is
// done, then writes what is left once (within the timeout) and returns.
func (r *sweepRecorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			r.flush(context.WithoutCancel(ctx))
			return
		case <-r.kick:
			r.flush(ctx)
		}
	}
}

// recordBatch bounds the sweeps of one store call, each within the store
// timeout: one call of a replica's 1,000 installations outlived it on
// dev-mongo (about 10 ms a sweep) and was never recorded.
const recordBatch = 100

// flush writes the pending sweeps, recordBatch to a store call, each call
// within the timeout. The sweeps of a call that fails are queued again,
// unless a later pass replaced one meanwhile, and written with the next
// batch.
func (r *sweepRecorder) flush(ctx context.Context) {
	r.mu.Lock()
	batch := r.pending
	r.pending = map[int64]gaterun.InstallationSweep{}
	r.mu.Unlock()
	for chunk := range slices.Chunk(slices.Collect(maps.Values(batch)), recordBatch) {
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		err := r.store.RecordSweeps(cctx, chunk)
		cancel()
		if err == nil {
			continue
		}
		r.log.Warn("installation sweeps not recorded; retried with the next pass", "installations", len(chunk), "err", err)
		r.mu.Lock()
		for _, sw := range chunk {
			if _, later := r.pending[sw.Installation]; !later {
				r.pending[sw.Installation] = sw
			}
		}
		r.mu.Unlock()
	}
}

// sweepPassed records p, in App mode, as its installation's last complete
// sweep, then passes it on to Config.OnSweep.
func (s *Server) sweepPassed(p SweepPass) {
	if s.recorder != nil {
		// The count of the pass before: this pass's look-ups come after
		// it reports (installationSweeps.pass).
		s.recorder.note(p, s.sweeps.uncoveredOf(p.Installation))
	}
	if s.cfg.OnSweep != nil {
		s.cfg.OnSweep(p)
	}
}

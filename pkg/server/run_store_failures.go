package server

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/gaterun"
)

// runStoreCalls are the values of run_store_calls_failed_total's call
// label: the run store's methods, gaterun.Store's and
// gaterun.InstallationStore's, in snake case.
var runStoreCalls = []string{"put", "get", "unsettled", "unsettled_in", "unsettled_among", "for_pull", "for_head",
	"list", "settle", "move", "record_sweeps", "sweeps", "open_runs"}

// newRunStoreFailures returns run_store_calls_failed_total, every series
// from the start, so a rate over it is 0, not absent.
func newRunStoreFailures() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "run_store_calls_failed_total",
		Help: "Run store calls (gate_runs, installation_sweeps) that failed on this replica, by call: no answer within the caller's deadline, a connection or server error, or a malformed document. A run not found, an argument refused, or a call its caller cancelled is not counted. The log line of each failure names the run and the error.",
	}, []string{"call"})
	for _, call := range runStoreCalls {
		c.WithLabelValues(call)
	}
	return c
}

// countRuns returns runs with its failed calls counted in failed (an
// InstallationStore stays one). Every caller in the server calls the run
// store through it, so the count is the replica's.
func countRuns(runs gaterun.Store, failed *prometheus.CounterVec) gaterun.Store {
	c := countedRuns{runs: runs, failed: failed}
	if is, ok := runs.(gaterun.InstallationStore); ok {
		return countedInstallationRuns{countedRuns: c, is: is}
	}
	return c
}

// countedRuns is a run store whose failed calls are counted by call (see
// newRunStoreFailures for what counts). Safe for concurrent use, as the
// store is.
type countedRuns struct {
	runs   gaterun.Store
	failed *prometheus.CounterVec
}

var _ gaterun.Store = countedRuns{}

// count counts err, the answer of call, when it is a failure.
func (c countedRuns) count(call string, err error) {
	if err == nil || errors.Is(err, gaterun.ErrNotFound) || errors.Is(err, gaterun.ErrInvalid) || errors.Is(err, context.Canceled) {
		return
	}
	c.failed.WithLabelValues(call).Inc()
}

func (c countedRuns) Put(ctx context.Context, run gaterun.Run, now time.Time) (bool, error) {
	created, err := c.runs.Put(ctx, run, now)
	c.count("put", err)
	return created, err
}

func (c countedRuns) Get(ctx context.Context, id string) (gaterun.Run, error) {
	run, err := c.runs.Get(ctx, id)
	c.count("get", err)
	return run, err
}

func (c countedRuns) Unsettled(ctx context.Context, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	runs, err := c.runs.Unsettled(ctx, since, after, limit)
	c.count("unsettled", err)
	return runs, err
}

func (c countedRuns) UnsettledIn(ctx context.Context, installation int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	runs, err := c.runs.UnsettledIn(ctx, installation, since, after, limit)
	c.count("unsettled_in", err)
	return runs, err
}

func (c countedRuns) UnsettledAmong(ctx context.Context, installations []int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	runs, err := c.runs.UnsettledAmong(ctx, installations, since, after, limit)
	c.count("unsettled_among", err)
	return runs, err
}

func (c countedRuns) ForPull(ctx context.Context, host, repo string, pull int) ([]gaterun.Run, error) {
	runs, err := c.runs.ForPull(ctx, host, repo, pull)
	c.count("for_pull", err)
	return runs, err
}

func (c countedRuns) ForHead(ctx context.Context, host, repo, sha string) ([]gaterun.Run, error) {
	runs, err := c.runs.ForHead(ctx, host, repo, sha)
	c.count("for_head", err)
	return runs, err
}

func (c countedRuns) List(ctx context.Context, q gaterun.Query) ([]gaterun.Run, error) {
	runs, err := c.runs.List(ctx, q)
	c.count("list", err)
	return runs, err
}

func (c countedRuns) Settle(ctx context.Context, id string, reported time.Time) (bool, error) {
	settled, err := c.runs.Settle(ctx, id, reported)
	c.count("settle", err)
	return settled, err
}

func (c countedRuns) Move(ctx context.Context, id string, from, to int64, now time.Time) (bool, error) {
	moved, err := c.runs.Move(ctx, id, from, to, now)
	c.count("move", err)
	return moved, err
}

// countedInstallationRuns is countedRuns of an InstallationStore.
type countedInstallationRuns struct {
	countedRuns
	is gaterun.InstallationStore
}

var _ gaterun.InstallationStore = countedInstallationRuns{}

func (c countedInstallationRuns) RecordSweeps(ctx context.Context, sweeps []gaterun.InstallationSweep) error {
	err := c.is.RecordSweeps(ctx, sweeps)
	c.count("record_sweeps", err)
	return err
}

func (c countedInstallationRuns) Sweeps(ctx context.Context) ([]gaterun.InstallationSweep, error) {
	sweeps, err := c.is.Sweeps(ctx)
	c.count("sweeps", err)
	return sweeps, err
}

func (c countedInstallationRuns) OpenRuns(ctx context.Context) (map[int64]int, error) {
	open, err := c.is.OpenRuns(ctx)
	c.count("open_runs", err)
	return open, err
}

package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"iterion.dev/iterion/pkg/forge"
)

// outcome is what one offer of a run did.
type outcome string

// The outcomes of an offer.
const (
	// outcomeGone: the run is missing from the store or already settled;
	// nothing was read from the forge.
	outcomeGone outcome = "gone"
	// outcomeSettled: the pull request is closed, merged or has another
	// head, so the run was settled.
	outcomeSettled outcome = "settled"
	// outcomeCurrent: the gate context already shows the verdict.
	outcomeCurrent outcome = "current"
	// outcomePublished: the verdict was written as a commit status.
	outcomePublished outcome = "published"
	// outcomeFailed: a store or forge call failed; the run is left for the
	// next offer.
	outcomeFailed outcome = "failed"
)

// offerer offers a run: it brings the forge in line with the run, or
// settles it. The sweeper and the event path use the reconciler through it.
type offerer interface {
	Offer(ctx context.Context, run GateRun) (outcome, error)
}

// reconciler publishes gating runs' verdicts as commit statuses. It is safe
// for concurrent use, and its Offer is idempotent: racing offers of one run,
// from any replicas, converge on the same status.
type reconciler struct {
	runs   RunStore
	forge  *forge.Client
	logger *slog.Logger
}

var _ offerer = (*reconciler)(nil)

// newReconciler returns a reconciler that reads runs from runs and talks to
// the forge through fc. A nil logger discards.
func newReconciler(runs RunStore, fc *forge.Client, logger *slog.Logger) *reconciler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &reconciler{runs: runs, forge: fc, logger: logger}
}

// Offer re-reads run (by its ID) from the store and the pull request from
// the forge before it writes anything: a closed or merged pull request, or
// one whose head moved, settles the run; otherwise it reads the head's
// combined status and creates the status when the gate context's state
// differs from the verdict. The forge requests are charged to the lane in
// ctx (forge.WithLane).
//
// A failed call is logged and returned with outcomeFailed, and the run is
// left for the next offer. A forge rate limit comes back as an error that
// errors.As finds a *forge.RateLimitError in, so a caller offering many runs
// can stop until its Reset.
func (r *reconciler) Offer(ctx context.Context, run GateRun) (outcome, error) {
	fresh, err := r.runs.Get(ctx, run.ID)
	if errors.Is(err, ErrNotFound) {
		return outcomeGone, nil
	}
	if err != nil {
		return r.failed("read run", run, err)
	}
	if fresh.Settled {
		return outcomeGone, nil
	}
	owner, repo := fresh.ownerRepo()
	pull, err := r.forge.GetPull(ctx, owner, repo, fresh.Pull)
	if err != nil {
		return r.failed("read pull", fresh, err)
	}
	if pull.State == "closed" || pull.Merged || pull.HeadSHA != fresh.HeadSHA {
		if err := r.runs.Settle(ctx, fresh.ID); err != nil {
			return r.failed("settle run", fresh, err)
		}
		r.logger.Debug("run settled", "run", fresh.ID, "repo", fresh.Repo, "pull", fresh.Pull,
			"state", pull.State, "merged", pull.Merged, "head", pull.HeadSHA)
		return outcomeSettled, nil
	}
	cs, err := r.forge.CombinedStatus(ctx, owner, repo, fresh.HeadSHA)
	if err != nil {
		return r.failed("read status", fresh, err)
	}
	for _, st := range cs.Statuses {
		if st.Context == fresh.Context && st.State == string(fresh.Verdict) {
			return outcomeCurrent, nil
		}
	}
	err = r.forge.CreateStatus(ctx, owner, repo, fresh.HeadSHA, forge.Status{
		Context: fresh.Context, State: string(fresh.Verdict),
		Description: fresh.Description, TargetURL: fresh.TargetURL,
	})
	if err != nil {
		return r.failed("create status", fresh, err)
	}
	r.logger.Debug("status published", "run", fresh.ID, "repo", fresh.Repo, "pull", fresh.Pull,
		"context", fresh.Context, "verdict", fresh.Verdict)
	return outcomePublished, nil
}

// failed logs a failed step of an offer and returns it as outcomeFailed.
func (r *reconciler) failed(step string, run GateRun, err error) (outcome, error) {
	r.logger.Warn("offer failed; left for the next offer", "step", step, "run", run.ID,
		"repo", run.Repo, "pull", run.Pull, "err", err)
	return outcomeFailed, fmt.Errorf("server: offer run %s: %s: %w", run.ID, step, err)
}

package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"iterion.dev/iterion/pkg/forge"
)

// Outcome is what one offer of a run did.
type Outcome string

// The outcomes of an offer.
const (
	// OutcomeGone: the run is missing from the store or already settled;
	// nothing was read from the forge.
	OutcomeGone Outcome = "gone"
	// OutcomeSettled: the pull request is closed, merged or has another
	// head, so the run was settled.
	OutcomeSettled Outcome = "settled"
	// OutcomeCurrent: the gate context already shows the verdict.
	OutcomeCurrent Outcome = "current"
	// OutcomePublished: the verdict was written as a commit status.
	OutcomePublished Outcome = "published"
	// OutcomeFailed: a store or forge call failed; the run is left for the
	// next offer.
	OutcomeFailed Outcome = "failed"
)

// Offerer offers a run: it brings the forge in line with the run, or
// settles it. The sweeper and the event path use the Reconciler through it.
type Offerer interface {
	Offer(ctx context.Context, run GateRun) (Outcome, error)
}

// Reconciler publishes gating runs' verdicts as commit statuses. It is safe
// for concurrent use, and its Offer is idempotent: racing offers of one run,
// from any replicas, converge on the same status.
type Reconciler struct {
	runs   RunStore
	forge  *forge.Client
	logger *slog.Logger
}

var _ Offerer = (*Reconciler)(nil)

// NewReconciler returns a Reconciler that reads runs from runs and talks to
// the forge through fc. A nil logger discards.
func NewReconciler(runs RunStore, fc *forge.Client, logger *slog.Logger) *Reconciler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{runs: runs, forge: fc, logger: logger}
}

// Offer re-reads run (by its ID) from the store and the pull request from
// the forge before it writes anything: a closed or merged pull request, or
// one whose head moved, settles the run; otherwise it reads the head's
// combined status and creates the status when the gate context's state
// differs from the verdict. The forge requests are charged to the lane in
// ctx (forge.WithLane).
//
// A failed call is logged and returned with OutcomeFailed, and the run is
// left for the next offer. A forge rate limit comes back as an error that
// errors.As finds a *forge.RateLimitError in, so a caller offering many runs
// can stop until its Reset.
func (r *Reconciler) Offer(ctx context.Context, run GateRun) (Outcome, error) {
	fresh, err := r.runs.Get(ctx, run.ID)
	if errors.Is(err, ErrNotFound) {
		return OutcomeGone, nil
	}
	if err != nil {
		return r.failed("read run", run, err)
	}
	if fresh.Settled {
		return OutcomeGone, nil
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
		return OutcomeSettled, nil
	}
	cs, err := r.forge.CombinedStatus(ctx, owner, repo, fresh.HeadSHA)
	if err != nil {
		return r.failed("read status", fresh, err)
	}
	for _, st := range cs.Statuses {
		if st.Context == fresh.Context && st.State == string(fresh.Verdict) {
			return OutcomeCurrent, nil
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
	return OutcomePublished, nil
}

// failed logs a failed step of an offer and returns it as OutcomeFailed.
func (r *Reconciler) failed(step string, run GateRun, err error) (Outcome, error) {
	r.logger.Warn("offer failed; left for the next offer", "step", step, "run", run.ID,
		"repo", run.Repo, "pull", run.Pull, "err", err)
	return OutcomeFailed, fmt.Errorf("server: offer run %s: %s: %w", run.ID, step, err)
}

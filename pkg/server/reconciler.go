package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
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
	// outcomeUnreadable: the forge would not show the pull request (REST
	// 404 or 403, GraphQL NOT_FOUND or FORBIDDEN); the sweeper backs the
	// run off.
	outcomeUnreadable outcome = "unreadable"
)

// offerer offers runs: it brings the forge in line with each run, or
// settles it. The sweeper and the event path use the reconciler through it.
type offerer interface {
	// Offer offers one run (the event path).
	Offer(ctx context.Context, run gaterun.Run) (outcome, error)
	// OfferBatch offers up to forge.MaxPullBatch runs, reading their pull
	// requests together (the sweeper); one outcome per run, in order.
	OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error)
}

// reconciler publishes gating runs' verdicts as commit statuses. It is safe
// for concurrent use, and its Offer is idempotent: racing offers of one run,
// from any replicas, converge on the same status.
type reconciler struct {
	runs   gaterun.Store
	forge  *forge.Client
	logger *slog.Logger
}

var _ offerer = (*reconciler)(nil)

// newReconciler returns a reconciler that reads runs from runs and talks to
// the forge through fc. A nil logger discards.
func newReconciler(runs gaterun.Store, fc *forge.Client, logger *slog.Logger) *reconciler {
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
// A failed call is logged and returned with outcomeFailed (outcomeUnreadable
// when the forge would not show the pull request), and the run is left for
// the next offer. A forge rate limit comes back as an error that
// errors.As finds a *forge.RateLimitError in, so a caller offering many runs
// can stop until its Reset.
func (r *reconciler) Offer(ctx context.Context, run gaterun.Run) (outcome, error) {
	fresh, out, err := r.reread(ctx, run)
	if out != "" {
		return out, err
	}
	owner, repo := ownerRepo(fresh)
	pull, err := r.forge.GetPull(ctx, owner, repo, fresh.Pull)
	if err != nil {
		return r.unread(fresh, err)
	}
	return r.decide(ctx, fresh, pull, func() ([]forge.Status, error) {
		cs, err := r.forge.CombinedStatus(ctx, owner, repo, fresh.HeadSHA)
		return cs.Statuses, err
	})
}

// OfferBatch offers runs as Offer does each, and decides each the same way
// (decide), but reads their pull requests and head statuses in one GraphQL
// query (forge.Client.PullStates) instead of two REST reads per run; only a
// drifted run costs a request more, its POST status. It returns one outcome
// per run, in order, and every failure joined: a forge rate limit stopping
// the query (errors.As finds a *forge.RateLimitError) fails every run that
// needed it. More than forge.MaxPullBatch runs fail the forge read.
func (r *reconciler) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error) {
	outs := make([]outcome, len(runs))
	var errs []error
	var read []int // indexes of the runs whose pull request is read
	var fresh []gaterun.Run
	var refs []forge.PullRef
	for i, run := range runs {
		f, out, err := r.reread(ctx, run)
		if out != "" {
			outs[i], errs = out, append(errs, err)
			continue
		}
		owner, repo := ownerRepo(f)
		read, fresh = append(read, i), append(fresh, f)
		refs = append(refs, forge.PullRef{Owner: owner, Repo: repo, Number: f.Pull})
	}
	if len(refs) == 0 {
		return outs, errors.Join(errs...)
	}
	states, err := r.forge.PullStates(ctx, refs)
	if err != nil {
		for j, i := range read {
			outs[i], _ = r.failed("read pulls", fresh[j], err)
		}
		return outs, errors.Join(append(errs, fmt.Errorf("server: offer %d runs: read pulls: %w", len(refs), err))...)
	}
	for j, i := range read {
		st := states[j]
		if st.Err != nil {
			outs[i], err = r.unread(fresh[j], st.Err)
		} else {
			outs[i], err = r.decide(ctx, fresh[j], st.Pull, func() ([]forge.Status, error) { return st.Statuses, nil })
		}
		errs = append(errs, err)
	}
	return outs, errors.Join(errs...)
}

// reread reads run afresh from the store. A non-empty outcome ends the
// offer there: the run is gone or settled (nothing to do), or the read
// failed.
func (r *reconciler) reread(ctx context.Context, run gaterun.Run) (gaterun.Run, outcome, error) {
	fresh, err := r.runs.Get(ctx, run.ID)
	if errors.Is(err, gaterun.ErrNotFound) {
		return gaterun.Run{}, outcomeGone, nil
	}
	if err != nil {
		out, err := r.failed("read run", run, err)
		return gaterun.Run{}, out, err
	}
	if fresh.Settled {
		return gaterun.Run{}, outcomeGone, nil
	}
	return fresh, "", nil
}

// unread is the outcome of a pull request that could not be read:
// unreadable when the forge refused to show it (not found, forbidden),
// failed otherwise.
func (r *reconciler) unread(run gaterun.Run, err error) (outcome, error) {
	out, err := r.failed("read pull", run, err)
	if errors.Is(err, forge.ErrNotFound) || errors.Is(err, forge.ErrForbidden) {
		out = outcomeUnreadable
	}
	return out, err
}

// decide is the one decision of an offer, the event path's and the batch's,
// from the pull request the forge showed: closed, merged or another head
// settles the run; otherwise, when the gate context's latest status
// (statuses reads the head's, lazily: a settled run needs none) differs
// from the verdict, it creates the status.
func (r *reconciler) decide(ctx context.Context, fresh gaterun.Run, pull forge.Pull, statuses func() ([]forge.Status, error)) (outcome, error) {
	if pull.State == "closed" || pull.Merged || pull.HeadSHA != fresh.HeadSHA {
		if err := r.runs.Settle(ctx, fresh.ID); err != nil {
			return r.failed("settle run", fresh, err)
		}
		r.logger.Debug("run settled", "run", fresh.ID, "repo", fresh.Repo, "pull", fresh.Pull,
			"state", pull.State, "merged", pull.Merged, "head", pull.HeadSHA)
		return outcomeSettled, nil
	}
	sts, err := statuses()
	if err != nil {
		return r.failed("read status", fresh, err)
	}
	for _, st := range sts {
		if st.Context == fresh.Context && st.State == string(fresh.Verdict) {
			return outcomeCurrent, nil
		}
	}
	owner, repo := ownerRepo(fresh)
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
func (r *reconciler) failed(step string, run gaterun.Run, err error) (outcome, error) {
	r.logger.Warn("offer failed; left for the next offer", "step", step, "run", run.ID,
		"repo", run.Repo, "pull", run.Pull, "err", err)
	return outcomeFailed, fmt.Errorf("server: offer run %s: %s: %w", run.ID, step, err)
}

// ownerRepo splits run.Repo, which the store validated, into owner and name.
func ownerRepo(run gaterun.Run) (owner, name string) {
	owner, name, _ = strings.Cut(run.Repo, "/")
	return owner, name
}

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
	// outcomeSuperseded: another unsettled run of the same commit and
	// context decides its status (decides), so this one writes nothing.
	outcomeSuperseded outcome = "superseded"
	// outcomeReported: the pull request called for settling the run, but
	// its verdict was reported again after the offer read it, so it was
	// left unsettled: the new report's own offer, or the next sweep,
	// decides it from the forge as it is then.
	outcomeReported outcome = "reported"
)

// offerer offers runs: it brings the forge in line with each run, or
// settles it. The sweeper and the event path use the reconciler through it.
// Its forge calls go through timeForge, so the sweeper's time budget counts
// the forge's response time and not the store's.
type offerer interface {
	// Offer offers one run (the event path).
	Offer(ctx context.Context, run gaterun.Run) (outcome, error)
	// OfferBatch offers up to forge.MaxPullBatch runs as the store just
	// listed them, reading their pull requests together (the sweeper); one
	// outcome per run, in order.
	OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error)
}

// reconciler publishes gating runs' verdicts as commit statuses. It is safe
// for concurrent use, and its Offer is idempotent: racing offers of one run,
// from any replicas, converge on the same status.
type reconciler struct {
	runs    gaterun.Store
	forgeOf forgeOf
	logger  *slog.Logger
}

var _ offerer = (*reconciler)(nil)

// forgeOf returns the forge client that offers run: the one client of a
// token or single installation, or, in App mode, the client of the run's
// installation (appForge).
type forgeOf func(ctx context.Context, run gaterun.Run) (*forge.Client, error)

// newReconciler returns a reconciler that reads runs from runs and talks to
// the forge through fc, whatever the run. A nil logger discards.
func newReconciler(runs gaterun.Store, fc *forge.Client, logger *slog.Logger) *reconciler {
	return newReconcilerOf(runs, func(context.Context, gaterun.Run) (*forge.Client, error) { return fc, nil }, logger)
}

// newReconcilerOf returns a reconciler that reads runs from runs and
// offers each through the client clients returns for it. A nil logger
// discards.
func newReconcilerOf(runs gaterun.Store, clients forgeOf, logger *slog.Logger) *reconciler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &reconciler{runs: runs, forgeOf: clients, logger: logger}
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
	return r.offerStored(ctx, fresh)
}

// offerStored is Offer for a run just read from the store: two REST reads,
// then the decision.
func (r *reconciler) offerStored(ctx context.Context, run gaterun.Run) (outcome, error) {
	fc, err := r.forgeOf(ctx, run)
	if err != nil {
		return r.failed("find the run's installation", run, err)
	}
	owner, repo := ownerRepo(run)
	var pull forge.Pull
	err = timeForge(ctx, func() (err error) {
		pull, err = fc.GetPull(ctx, owner, repo, run.Pull)
		return err
	})
	if err != nil {
		return r.unread(run, err)
	}
	a, err := choose(run, pull, func() ([]forge.Status, error) {
		var cs forge.CombinedStatus
		err := timeForge(ctx, func() (err error) {
			cs, err = fc.CombinedStatus(ctx, owner, repo, run.HeadSHA)
			return err
		})
		return cs.Statuses, err
	})
	if err != nil {
		return r.failed("read status", run, err)
	}
	return r.act(ctx, fc, run, pull, a)
}

// OfferBatch offers runs as the store listed them an instant before (the
// sweeper's page, unsettled), deciding each as Offer does (choose), but
// with two reads for the whole batch instead of two per run: the listing
// itself, and one GraphQL query (forge.Client.PullStates) for the pull
// requests and their heads' statuses. Only a run that needs a write costs
// more: it is re-read from the store first, and written only if it is
// unchanged since the listing; a run settled or gone meanwhile is gone,
// and one whose verdict changed is offered afresh, as Offer does. So, as
// with Offer, nothing is written from a stale copy, and a pass's store
// reads grow with its pages and its drifted runs, not with open runs.
//
// The runs are of one installation (the sweeper lists one installation's
// at a time): the query goes through the first run's client.
//
// It returns one outcome per run, in order, and every failure joined: a
// forge rate limit stopping the query (errors.As finds a
// *forge.RateLimitError) fails every run. More than forge.MaxPullBatch runs
// fail the forge read. When the read answered for some run's pull request,
// the failures are the runs' own, joined in an afterRead.
func (r *reconciler) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error) {
	outs, _, err := r.offerBatch(ctx, runs)
	return outs, err
}

// offerBatch is OfferBatch, with each run's own error beside its outcome
// (nil when its offer did not fail), for a caller that notes every run's
// offer.
func (r *reconciler) offerBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, []error, error) {
	outs, errs := make([]outcome, len(runs)), make([]error, len(runs))
	if len(runs) == 0 {
		return outs, errs, nil
	}
	fc, err := r.forgeOf(ctx, runs[0])
	if err != nil {
		for i, run := range runs {
			outs[i], errs[i] = r.failed("find the runs' installation", run, err)
		}
		return outs, errs, fmt.Errorf("server: offer %d runs: find installation %d: %w", len(runs), runs[0].Installation, err)
	}
	refs := make([]forge.PullRef, len(runs))
	for i, run := range runs {
		owner, repo := ownerRepo(run)
		refs[i] = forge.PullRef{Owner: owner, Repo: repo, Number: run.Pull}
	}
	var states []forge.PullState
	err = timeForge(ctx, func() (err error) {
		states, err = fc.PullStates(ctx, refs)
		return err
	})
	if err != nil {
		for i, run := range runs {
			outs[i], errs[i] = r.failed("read pulls", run, err)
		}
		return outs, errs, fmt.Errorf("server: offer %d runs: read pulls: %w", len(refs), err)
	}
	answered := false // some run's pull request read whole
	for i, run := range runs {
		outs[i], errs[i] = r.offerListed(ctx, fc, run, states[i])
		answered = answered || states[i].Err == nil
	}
	err = errors.Join(errs...)
	if err != nil && answered {
		return outs, errs, afterRead{err}
	}
	return outs, errs, err
}

// afterRead is the failures of a batch whose forge read answered for some
// run's pull request, joined: each run's own (a store read, a status write
// GitHub failed or the time budget refused, another pull request's
// malformed answer). Its text is theirs. It tells a forge that answered
// the read from one that did not: a write GitHub stopped at its timeout is
// no failing forge (see sentBatch.read), while a batch whose every pull
// request came back malformed is a failed read.
type afterRead struct{ err error }

func (e afterRead) Error() string { return e.err.Error() }
func (e afterRead) Unwrap() error { return e.err }

// offerListed decides a listed run from the forge's state of its pull
// request, and re-reads it from the store before any write (OfferBatch).
func (r *reconciler) offerListed(ctx context.Context, fc *forge.Client, listed gaterun.Run, st forge.PullState) (outcome, error) {
	if st.Err != nil {
		return r.unread(listed, st.Err)
	}
	a, _ := choose(listed, st.Pull, func() ([]forge.Status, error) { return st.Statuses, nil })
	if a == actNone {
		return outcomeCurrent, nil
	}
	fresh, out, err := r.reread(ctx, listed)
	switch {
	case out != "":
		return out, err
	case !unchanged(listed, fresh):
		return r.offerStored(ctx, fresh)
	}
	return r.act(ctx, fc, fresh, st.Pull, a)
}

// unchanged reports whether fresh, the stored run, is still the run listed
// was read as: same verdict and status fields, same Updated. (Its ID fixes
// its host, repository, pull request and head.)
func unchanged(listed, fresh gaterun.Run) bool {
	return listed.Updated.Equal(fresh.Updated) && listed.Settled == fresh.Settled &&
		listed.Context == fresh.Context && listed.Verdict == fresh.Verdict &&
		listed.Description == fresh.Description && listed.TargetURL == fresh.TargetURL
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

// action is what an offer's decision calls for.
type action int

// The actions.
const (
	// actNone: the gate context already shows the verdict.
	actNone action = iota
	// actSettle: the pull request is closed, merged or has another head.
	actSettle
	// actPublish: the gate context's latest status differs from the
	// verdict.
	actPublish
)

// choose is the one decision of an offer, the event path's and the batch's,
// from the pull request the forge showed: closed, merged or another head
// settles the run; otherwise, when the gate context's latest status
// (statuses reads the head's, lazily: a settled run needs none) differs
// from the verdict, the verdict is published. An error is statuses'.
func choose(run gaterun.Run, pull forge.Pull, statuses func() ([]forge.Status, error)) (action, error) {
	if pull.State == "closed" || pull.Merged || pull.HeadSHA != run.HeadSHA {
		return actSettle, nil
	}
	sts, err := statuses()
	if err != nil {
		return actNone, err
	}
	for _, st := range sts {
		// A status context is case-insensitive on GitHub ("The context
		// field is case-insensitive", Create a commit status:
		// https://docs.github.com/rest/commits/statuses#create-a-commit-status),
		// so CI/Review is the gate's iterion/review context too.
		if strings.EqualFold(st.Context, run.Context) && st.State == string(run.Verdict) {
			return actNone, nil
		}
	}
	return actPublish, nil
}

// act carries out a for run, whose pull request the forge showed as pull:
// it settles the run in the store or creates the verdict's status through
// fc.
func (r *reconciler) act(ctx context.Context, fc *forge.Client, run gaterun.Run, pull forge.Pull, a action) (outcome, error) {
	switch a {
	case actSettle:
		// Conditional on the report decided from: a verdict reported
		// between the read and this write (a pull request reopened and
		// reviewed again) is news no forge read here has seen, and
		// settling it would hide it from every later offer.
		settled, err := r.runs.Settle(ctx, run.ID, run.Reported)
		if err != nil {
			return r.failed("settle run", run, err)
		}
		if !settled {
			r.logger.Debug("run not settled: its verdict was reported again since the offer read it", "run", run.ID,
				"repo", run.Repo, "pull", run.Pull, "reported", run.Reported)
			return outcomeReported, nil
		}
		r.logger.Debug("run settled", "run", run.ID, "repo", run.Repo, "pull", run.Pull,
			"state", pull.State, "merged", pull.Merged, "head", pull.HeadSHA)
		return outcomeSettled, nil
	case actPublish:
		by, err := r.decider(ctx, run)
		if err != nil {
			return r.failed("read the commit's runs", run, err)
		}
		if by.ID != run.ID {
			r.logger.Debug("run superseded: another run decides its commit's status", "run", run.ID,
				"repo", run.Repo, "pull", run.Pull, "head", run.HeadSHA, "context", run.Context, "decided_by", by.ID, "decider_pull", by.Pull)
			return outcomeSuperseded, nil
		}
		owner, repo := ownerRepo(run)
		err = timeForge(ctx, func() error {
			return fc.CreateStatus(ctx, owner, repo, run.HeadSHA, forge.Status{
				Context: run.Context, State: string(run.Verdict),
				Description: run.Description, TargetURL: run.TargetURL,
			})
		})
		if err != nil {
			return r.failed("create status", run, err)
		}
		r.logger.Debug("status published", "run", run.ID, "repo", run.Repo, "pull", run.Pull,
			"context", run.Context, "verdict", run.Verdict)
		return r.afterPublish(ctx, run)
	}
	return outcomeCurrent, nil
}

// afterPublish reads the runs of run's commit again once its verdict is
// written. GitHub keeps the last status written, and a status write cannot
// be made conditional: a verdict reported while this one was read and
// written (run's again, or another pull request's run of the same commit
// and context, reported later) may have been published by its own offer
// before this write landed, which then undid it. So the run that decides
// now (decides) is offered here, its status written after this one, when
// it is not the run just written as it was read. A failed read leaves it to
// the sweep: the write itself succeeded.
func (r *reconciler) afterPublish(ctx context.Context, run gaterun.Run) (outcome, error) {
	same, err := r.runs.ForHead(ctx, run.Host, run.Repo, run.HeadSHA)
	if err != nil {
		return outcomePublished, nil
	}
	by := decides(same, run)
	if by.ID == run.ID && by.Reported.Equal(run.Reported) {
		return outcomePublished, nil
	}
	r.logger.Debug("the commit's status was reported again while it was written; offering the verdict that decides it now", "run", run.ID,
		"repo", run.Repo, "pull", run.Pull, "written", run.Verdict, "decided_by", by.ID, "decider_pull", by.Pull, "verdict", by.Verdict)
	if by.ID == run.ID {
		return r.offerStored(ctx, by)
	}
	_, _ = r.offerStored(ctx, by) // the decider's offer; a failure is logged and left to the sweep
	return outcomePublished, nil
}

// decider returns the run that decides the status of run's commit and
// context, run itself when no other does. GitHub keeps one state per commit
// and context, and pull requests may share a head, so runs that disagree
// about one commit must not each write theirs: the unsettled run of the
// commit and context reported last decides (decides), and the others are
// superseded until it settles. Reported last, not updated last: a move to
// another installation (gaterun.Store.Move) bumps Updated and reports
// nothing, so it must not hand the commit to an older verdict.
func (r *reconciler) decider(ctx context.Context, run gaterun.Run) (gaterun.Run, error) {
	same, err := r.runs.ForHead(ctx, run.Host, run.Repo, run.HeadSHA)
	if err != nil {
		return gaterun.Run{}, err
	}
	return decides(append(same, run), run), nil
}

// decides returns the run of runs that decides the status of of's commit
// and context: of those with of's host, repository (compared as GitHub
// compares names, and as the store matches them: forge.RepoKey), head and
// context (compared without case, as GitHub compares contexts), the one
// whose verdict was reported last (gaterun.Run.Reported), the larger ID
// breaking a tie, so every replica picks the same one.
func decides(runs []gaterun.Run, of gaterun.Run) gaterun.Run {
	best, repo := of, forge.RepoKey(of.Repo)
	for _, o := range runs {
		if o.Host != of.Host || forge.RepoKey(o.Repo) != repo || o.HeadSHA != of.HeadSHA || !strings.EqualFold(o.Context, of.Context) || o.Settled {
			continue
		}
		if c := o.Reported.Compare(best.Reported); c > 0 || c == 0 && o.ID > best.ID {
			best = o
		}
	}
	return best
}

// failed logs a failed step of an offer and returns it as outcomeFailed;
// a forge call the sweep's time budget had no room for (errNoRoom) is
// logged at debug level: the budget at work, not a failure.
func (r *reconciler) failed(step string, run gaterun.Run, err error) (outcome, error) {
	log := r.logger.Warn
	if errors.Is(err, errNoRoom) {
		log = r.logger.Debug
	}
	log("offer failed; left for the next offer", "step", step, "run", run.ID,
		"repo", run.Repo, "pull", run.Pull, "installation", run.Installation, "err", err)
	return outcomeFailed, fmt.Errorf("server: offer run %s: %s: %w", run.ID, step, err)
}

// ownerRepo splits run.Repo, which the store validated, into owner and name.
func ownerRepo(run gaterun.Run) (owner, name string) {
	owner, name, _ = strings.Cut(run.Repo, "/")
	return owner, name
}

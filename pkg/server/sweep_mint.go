package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

// minted makes sure installation id has its token before its pass takes a
// slot (forge.AppClient.Mint), waiting up to an interval for the App JWT's
// turn: a replica starting with many installations mints their tokens one
// at a time, and a mint waited for inside the pass's first request would
// outlive that request's deadline, fail the pass and, three running, park
// the installation. A pass whose token did not come is skipped, neither a
// failure nor a success, as one that got no slot. It first waits, within
// that interval, for the mint ahead of the term's first pass to end
// (mintAhead; ahead closed): one GitHub refused is checked and held as
// the pass's own would be, so the pass neither mints again while that
// hold stands nor checks beside it. A mint GitHub refused (403) is
// checked (refusedMint); while the installation's mints are held back
// (mintHeld) the pass is skipped without a request. A token that comes
// ends the hold.
func (g *installationSweeps) minted(ctx context.Context, sw *sweeper, id int64, ahead <-chan struct{}) bool {
	now, deadline := g.s.cfg.Now(), time.Now().Add(g.interval)
	mctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-ahead:
	case <-mctx.Done():
		sw.cfg.Logger.Debug("sweep skipped: installation token not minted within an interval", "err", context.Cause(mctx))
		return false
	}
	if until, held := g.mintHeld(id, now); held {
		sw.cfg.Logger.Debug("sweep skipped: GitHub refused the installation's token, and it is not asked again yet", "until", until)
		return false
	}
	if err := g.mint(ctx, id, deadline); err != nil {
		sw.cfg.Logger.Debug("sweep skipped: installation token not minted within an interval", "err", err)
		if errors.Is(err, forge.ErrForbidden) {
			g.refusedMint(ctx, sw, id, now)
		}
		return false
	}
	g.releaseMint(id)
	return true
}

// MintAheadConcurrency is how many of a replica's mints ahead (mintAhead)
// run at once: each reads the installation's stored token first, and a
// term that gets a thousand installations would send the store a
// thousand reads at once, those that missed tokenStoreWait each becoming
// a mint through the App's JWT. The mints themselves go one at a time
// through the JWT's gate whatever this is.
const MintAheadConcurrency = 4

// mintAhead makes sure installation id, swept by sw, has its token
// (forge.AppClient.Mint) before its first pass of a shard term, due at
// at, rather than at that pass: the App's JWT mints one token at a time,
// so a term whose passes each waited for their own mint at their instant
// would have each wait behind the mints of those due before it, and the
// last first passes come past the first tick (decision 3's bound, and the
// takeover's). From the term's start, its mints have the whole interval
// before the tick. They run MintAheadConcurrency at a time per replica. It mints in the background and returns a channel
// closed once done, at once when at has come (the first pass mints
// then). A mint GitHub refused (403) stands for the first pass's: it is
// checked (refusedMint), its hold from at; another failure is left to
// the pass, which mints again. The pass waits for the channel (minted),
// so its wait is bounded as before: an interval from at.
func (g *installationSweeps) mintAhead(ctx context.Context, sw *sweeper, id int64, at time.Time) <-chan struct{} {
	done := make(chan struct{})
	if time.Until(at) <= 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		select {
		case g.aheadSlots <- struct{}{}:
			defer func() { <-g.aheadSlots }()
		case <-ctx.Done():
			return
		}
		if err := g.mint(ctx, id, at.Add(g.interval)); err != nil {
			sw.cfg.Logger.Debug("sweep: installation token not minted ahead of its first pass", "err", err)
			if errors.Is(err, forge.ErrForbidden) {
				g.refusedMint(ctx, sw, id, at)
			}
		}
	}()
	return done
}

// mint is installation id's forge.AppClient.Mint by deadline, watched
// (watched) as a pass is: a mint that ignores its cancellation fails
// /healthz forge.MintOverrun and TTL/6 after its deadline, naming the
// installation. It is not charged to the pass, whose deadline counts from
// its slot, but it would stop the installation's sweep with every signal
// green: it holds the App JWT's gate, so every mint, re-list and check of
// the replica waits for it and fails, and the passes of its installations
// are skipped (minted), which counts neither as a timeout nor as a
// failure.
func (g *installationSweeps) mint(ctx context.Context, id int64, deadline time.Time) error {
	var err error
	g.watched(ctx, fmt.Sprintf("%s installation %d token mint", MergeGateSweeper().Name, id), deadline,
		func(ctx context.Context) { err = g.app.Mint(ctx, id) })
	return err
}

// refusedMint asks GitHub whether installation id, whose token mint GitHub
// refused 403 in the pass that began at now (or ahead of the first pass,
// due at now: mintAhead), is suspended or gone, and drops it if so
// (checkRefused). GitHub refuses a suspended installation's mint 403
// ("Create an installation access token for an app":
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app)
// and sends a suspend webhook that may never arrive ("Handling failed
// webhook deliveries":
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries).
// An answer saying it is there (a 403 for another reason: the App's
// permissions, an organization's IP allow list, a transient refusal)
// holds its mints back (holdMint), counted in
// merge_gate_installation_mints_refused_total; no answer changes
// nothing.
func (g *installationSweeps) refusedMint(ctx context.Context, sw *sweeper, id int64, now time.Time) {
	gone, answered := g.checkRefused(ctx, sw.cfg.Logger, id, "sweep", "the installation's token")
	if !answered || gone {
		return
	}
	wait := g.holdMint(id, now)
	g.mintsRefused.Inc()
	sw.cfg.Logger.Warn("sweep: GitHub refused the installation's token, yet has the installation, not suspended: its token is not asked for again for a while",
		"for", wait.String())
}

// refusedRead is refusedMint for a sweep read GitHub refused for
// installation id's suspension (forge.ErrSuspended) with a token minted
// before it, which the forge client has dropped: the suspension's
// webhook was lost, and the token outlived it. The same one check with
// GitHub drops the installation; an answer saying it is not suspended
// (unsuspended since) holds nothing back: its next pass mints a token.
func (g *installationSweeps) refusedRead(ctx context.Context, sw *sweeper, id int64) {
	if gone, answered := g.checkRefused(ctx, sw.cfg.Logger, id, "sweep", "a read made with the installation's token"); answered && !gone {
		sw.cfg.Logger.Info("sweep: GitHub refused a read for the installation's suspension, and now says it is not suspended: a token is minted at its next pass")
	}
}

// checkRefused asks GitHub whether installation id, which GitHub refused
// what, is suspended or gone (AppClient.InstallationGone, one request
// with the App's JWT, within OfferTimeout), and if so drops it from the
// App client's set, so its sweeper, its board sync and the offers of its
// runs stop at once rather than being refused (a refused mint each) until
// the hourly re-list, and tells the other replicas
// (installationsChanged): they drop it too, and list it suspended when it
// is, without a request; an unsuspend webhook or a re-list brings it
// back. The sweeper checks after a refused mint or read (refusedMint,
// refusedRead), the webhook and API offers (Server.offerAll) and the
// board sync (suspensionChecked) after a refused read; log, whose lines
// begin with who, says what happened. It returns GitHub's answer and
// whether there was one.
func (g *installationSweeps) checkRefused(ctx context.Context, log *slog.Logger, id int64, who, what string) (gone, answered bool) {
	cctx, cancel := context.WithTimeout(ctx, g.s.cfg.OfferTimeout)
	gone, err := g.app.InstallationGone(cctx, id)
	cancel()
	switch {
	case err != nil:
		log.Warn(who+": GitHub refused "+what+", and did not say whether the installation is suspended", "err", err)
		return false, false
	case !gone:
		return false, true
	}
	log.Warn(who + ": installation dropped: GitHub refused " + what + ", and says it is suspended or gone")
	g.s.installationsChanged(ctx, g.app.DropChecked(id)) // InstallationGone noted GitHub's answer
	return true, true
}

// mintHold is how long an installation's mints are held back after GitHub
// refused one while it has the installation, not suspended.
type mintHold struct {
	until time.Time     // no mint before, give or take half an interval (mintHeld)
	wait  time.Duration // the last hold's length
}

// holdMint holds installation id's mints back from now, for one interval
// after a first refusal and twice the last hold after each refusal
// after, up to the App client's re-list period (forge.AppClient.RelistEvery,
// an hour by default), and returns the hold's length: a refusal that
// lasts (permissions not accepted, an IP allow list) costs a refused mint
// and a check a re-list period, not two requests an interval for ever,
// and one that passes is noticed within twice its length.
func (g *installationSweeps) holdMint(id int64, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.mintHolds[id]
	h.wait = min(max(2*h.wait, g.interval), g.app.RelistEvery())
	h.until = now.Add(h.wait)
	g.mintHolds[id] = h
	return h.wait
}

// mintHeld reports whether installation id's mints are held back at now,
// and until when. A pass's tick may read the clock a little before a
// whole number of intervals after the refused pass did, so a hold ending
// within half an interval of now has ended.
func (g *installationSweeps) mintHeld(id int64, now time.Time) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.mintHolds[id]
	return h.until, ok && now.Before(h.until.Add(-g.interval/2))
}

// releaseMint ends installation id's hold and its doubling: a token came
// (minted), an installation webhook or another replica's news about it
// was applied (installationEvent, runApp), or this replica stopped
// sweeping it (forget), as when a re-list drops it or its shard goes to
// another replica, which starts with no hold.
func (g *installationSweeps) releaseMint(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.mintHolds, id)
}

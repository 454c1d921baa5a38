package server

import (
	"context"
	"errors"

	"iterion.dev/iterion/pkg/forge"
)

// minted makes sure installation id has its token before its pass takes a
// slot (forge.AppClient.Mint), waiting up to an interval for the App JWT's
// turn: a replica starting with many installations mints their tokens one
// at a time, and a mint waited for inside the pass's first request would
// outlive that request's deadline, fail the pass and, three running, park
// the installation. A pass whose token did not come is skipped, neither a
// failure nor a success, as one that got no slot. A mint GitHub refused
// (403) is checked (refusedMint).
func (g *installationSweeps) minted(ctx context.Context, sw *sweeper, id int64) bool {
	mctx, cancel := context.WithTimeout(ctx, g.interval)
	defer cancel()
	if err := g.app.Mint(mctx, id); err != nil {
		sw.cfg.Logger.Debug("sweep skipped: installation token not minted within an interval", "err", err)
		if errors.Is(err, forge.ErrForbidden) {
			g.refusedMint(ctx, sw, id)
		}
		return false
	}
	return true
}

// refusedMint asks GitHub whether installation id, whose token mint GitHub
// refused 403, is suspended or gone (AppClient.InstallationGone, one
// request with the App's JWT, within OfferTimeout), and if so drops it
// from the App client's set, so its sweeper stops at once rather than
// asking for a refused token every pass until the hourly re-list. GitHub
// refuses a suspended installation's mint 403 ("Create an installation
// access token for an app":
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app)
// and sends a suspend webhook that may never arrive ("Handling failed
// webhook deliveries":
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries).
// The other replicas learn it at their re-list; an unsuspend webhook or a
// re-list brings it back. No answer, or one saying it is there, changes
// nothing.
func (g *installationSweeps) refusedMint(ctx context.Context, sw *sweeper, id int64) {
	cctx, cancel := context.WithTimeout(ctx, g.s.cfg.OfferTimeout)
	gone, err := g.app.InstallationGone(cctx, id)
	cancel()
	switch {
	case err != nil:
		sw.cfg.Logger.Warn("sweep: GitHub refused the installation's token, and did not say whether it is suspended", "err", err)
		return
	case !gone:
		sw.cfg.Logger.Warn("sweep: GitHub refused the installation's token, yet has the installation, not suspended")
		return
	}
	sw.cfg.Logger.Warn("sweep: installation dropped: GitHub refused its token, and says it is suspended or gone")
	g.app.Apply(forge.InstallationChange{ID: id, Gone: true})
	g.news.notify()
}

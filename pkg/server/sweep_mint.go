package server

import "context"

// minted makes sure installation id has its token before its pass takes a
// slot (forge.AppClient.Mint), waiting up to an interval for the App JWT's
// turn: a replica starting with many installations mints their tokens one
// at a time, and a mint waited for inside the pass's first request would
// outlive that request's deadline, fail the pass and, three running, park
// the installation. A pass whose token did not come is skipped, neither a
// failure nor a success, as one that got no slot.
func (g *installationSweeps) minted(ctx context.Context, sw *sweeper, id int64) bool {
	mctx, cancel := context.WithTimeout(ctx, g.interval)
	defer cancel()
	if err := g.app.Mint(mctx, id); err != nil {
		sw.cfg.Logger.Debug("sweep skipped: installation token not minted within an interval", "err", err)
		return false
	}
	return true
}

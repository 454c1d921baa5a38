package server_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// The helpers these tests share with pkg/board's, under their local names.
var (
	startSim       = forgetest.StartSim
	newForge       = forgetest.NewForge
	serveSimOnPipe = forgetest.ServeSimOnPipe
	newPipeNet     = forgetest.NewPipeNet
	textLogger     = forgetest.TextLogger
	laneCount      = forgetest.LaneCount
)

// rateLimited reports whether err carries a forge rate limit.
func rateLimited(err error) (*forge.RateLimitError, bool) {
	var rl *forge.RateLimitError
	return rl, errors.As(err, &rl)
}

// countingRuns is a run store that counts its reads: Get calls and
// Unsettled calls (pages listed).
type countingRuns struct {
	gaterun.Store
	gets, lists atomic.Int64
}

func (c *countingRuns) Get(ctx context.Context, id string) (gaterun.Run, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, id)
}

func (c *countingRuns) Unsettled(ctx context.Context, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	c.lists.Add(1)
	return c.Store.Unsettled(ctx, since, after, limit)
}

// take returns the Get and Unsettled calls since the last take.
func (c *countingRuns) take() (gets, lists int64) {
	return c.gets.Swap(0), c.lists.Swap(0)
}

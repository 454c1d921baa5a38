package server_test

import (
	"errors"

	"iterion.dev/iterion/internal/forgetest"
	"iterion.dev/iterion/pkg/forge"
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

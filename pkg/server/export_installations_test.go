package server

import (
	"context"
	"time"
)

// RecordSweepPass hands p to the server as the sweeper hands it each pass,
// then writes what that queued at once, as the recorder's loop in Run
// would, so a test needs no sweeper and no Run.
func (s *Server) RecordSweepPass(p SweepPass) {
	s.sweepPassed(p)
	if s.recorder != nil {
		s.recorder.flush(context.Background())
	}
}

// PassOffset is passOffset, for the tests of App mode's cadence.
func PassOffset(id int64, interval time.Duration) time.Duration { return passOffset(id, interval) }

// SweepRequestTimeout is the forge request deadline the sweeper of
// installation id works to (any id outside App mode): what bounds how
// long one of its batches can keep a pass waiting.
func (s *Server) SweepRequestTimeout(id int64) time.Duration {
	if s.sweeps != nil {
		return s.sweeps.newSweeper(id).cfg.RequestTimeout
	}
	return s.sweeper.cfg.RequestTimeout
}

// FollowInstallations is followInstallations, for its unit tests.
var FollowInstallations = followInstallations

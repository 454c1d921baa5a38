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

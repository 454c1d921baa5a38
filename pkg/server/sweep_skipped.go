package server

import (
	"maps"
	"slices"
	"sync"
)

// skippedRuns collects, by _id, the run documents a pass's listings
// skipped because the store cannot read them as runs (gaterun.WithSkipped),
// so that the pass tells of each once however many of its listings (the
// shallow window, its round, the deep window; in App mode the replica's
// snapshot, whichever pass reads it) met it. Safe for concurrent use.
type skippedRuns struct {
	mu   sync.Mutex
	errs map[string]error
}

// note records that a listing skipped the document id for err.
func (k *skippedRuns) note(id string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.errs == nil {
		k.errs = map[string]error{}
	}
	k.errs[id] = err
}

// tellSkipped logs each document a pass skipped, naming its _id and the
// store's error (which names the field at fault), and counts them in
// cfg.Malformed: the runs they stand for are not swept until the document
// is repaired or deleted, while the rest of the runs are.
func (s *sweeper) tellSkipped(k *skippedRuns) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(k.errs)) {
		s.cfg.Logger.Warn("sweep skipped a run document it cannot read; repair or delete it", "run", id, "err", k.errs[id])
	}
	if s.cfg.Malformed != nil {
		s.cfg.Malformed.Add(float64(len(k.errs)))
	}
}

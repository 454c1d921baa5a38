package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"iterion.dev/iterion/pkg/board"
)

// TestABoardPassCountsTheMalformedCardsItMet pins that every board pass,
// of the sync under one lease or of an installation's, adds the card
// documents it met and could not read (board.Pass.Malformed) to
// board_malformed_cards_total, which alert IterionMalformedCards watches.
func TestABoardPassCountsTheMalformedCardsItMet(t *testing.T) {
	counted := prometheus.NewCounter(prometheus.CounterOpts{Name: "board_malformed_cards_total"})
	s := &Server{boardMalformed: counted}
	s.cfg.Now = time.Now
	for _, n := range []int{2, 0, 1} {
		s.boardPassed(board.Pass{Malformed: n, Complete: true})
	}
	if got := testutil.ToFloat64(counted); got != 3 {
		t.Errorf("board_malformed_cards_total after passes that met 2, 0 and 1 = %v, want 3: each pass adds what it met", got)
	}
}

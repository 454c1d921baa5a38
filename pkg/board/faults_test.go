package board_test

import (
	"context"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestSyncOnMongoLosesNothingToALostAnswer runs the sync on the Mongo
// board through the fault proxy: a card update whose write lands but whose
// answer is lost fails the repository's pass, the watermark stays, and the
// next pass stores every card, the landed one counted as no change.
func TestSyncOnMongoLosesNothingToALostAnswer(t *testing.T) {
	ms := mongotest.NewServer(t)
	store := newMongoStore(t, ms.DB(t))
	sim, simSrv := forgetest.StartSim(t)
	for n := 1; n <= 3; n++ {
		if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "i", State: "open"}); err != nil {
			t.Fatal(err)
		}
	}
	fc := forgetest.NewForge(t, simSrv.URL+"/", nil, "tok", nil, nil)
	passes := make(chan board.Pass, 10)
	sync, err := board.NewSync(board.Config{Store: store, Forge: fc, Host: "github.com",
		Repos: []string{"acme/app"}, Interval: 50 * time.Millisecond, OnPass: func(p board.Pass) { passes <- p }})
	if err != nil {
		t.Fatal(err)
	}
	drop := ms.Proxy().DropAnswer(func(c mongotest.Command) bool {
		return c.Name == "update" && c.Collection == board.Collection
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sync.Work(ctx) }()
	defer func() { cancel(); <-done }()
	next := func() board.Pass {
		t.Helper()
		select {
		case p := <-passes:
			return p
		case <-time.After(30 * time.Second):
			t.Fatalf("no pass in 30s")
			return board.Pass{}
		}
	}

	p := next()
	<-drop.Done()
	if rp := p.Repos[0]; rp.Err == nil || !rp.Watermark.IsZero() {
		t.Fatalf("pass with a lost answer: got %+v, want an error and the watermark unmoved: an unanswered write is not known to have landed", rp)
	}
	p = next()
	// The first card's write landed before its answer was lost; the other
	// two were never sent.
	if rp := p.Repos[0]; rp.Err != nil || !rp.Since.IsZero() || rp.Listed != 3 || rp.Changed != 2 {
		t.Fatalf("pass after: got %+v, want since zero again, 3 listed, 2 changed: nothing is lost and the landed write is no change", rp)
	}
	cards, err := store.Cards(context.Background(), board.Query{Limit: 10})
	if err != nil || len(cards) != 3 {
		t.Fatalf("cards = %d, %v, want 3: every issue is on the board", len(cards), err)
	}
}

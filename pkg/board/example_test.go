package board_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
)

// ExampleSync elects the board sync as the server does: one lease.Run call
// whose term is the sync's Work. The server names the lease
// forge-board-sync (server.ForgeBoardSync) and derives its TTL (three
// intervals) and retry (one) from the sync's interval.
func ExampleSync() {
	sim := forgesim.New()
	_ = sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "crash on start", State: "open", Labels: []string{"bug"}})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	fc, err := forge.New(forge.Config{BaseURL: simSrv.URL + "/", Token: "installation-token"})
	if err != nil {
		panic(err)
	}
	store := board.NewMemoryStore()
	passed := make(chan board.Pass, 1)
	bs, err := board.NewSync(board.Config{
		Store: store, Forge: fc, Host: "github.com", Repos: []string{"acme/app"}, Interval: time.Second,
		OnPass: func(p board.Pass) {
			select {
			case passed <- p:
			default:
			}
		},
	})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- lease.Run(ctx, lease.NewMemoryStore(), lease.Spec{
			Name: "forge-board-sync", Owner: "replica-a", TTL: 3 * bs.Interval(), Retry: bs.Interval(),
		}, bs.Work)
	}()
	p := <-passed
	cancel()
	<-done

	fmt.Printf("term %d pass %d: %d listed, %d changed\n", p.Term, p.Pass, p.Repos[0].Listed, p.Repos[0].Changed)
	cards, _ := store.Cards(context.Background(), board.Query{Limit: 10})
	for _, c := range cards {
		fmt.Println(c.ID(), c.State, c.Title, c.Labels)
	}
	// Output:
	// term 1 pass 1: 1 listed, 1 changed
	// github.com/acme/app#1 open crash on start [bug]
}

package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// ExampleBoardSync elects the board sync as the Server does: one lease.Run
// call under the lease ForgeBoardSync(), whose TTL and retry follow the
// sync's interval, with the sync's Work as the term.
func ExampleBoardSync() {
	sim := forgesim.New()
	_ = sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "crash on start", State: "open", Labels: []string{"bug"}})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	fc, err := forge.New(forge.Config{BaseURL: simSrv.URL + "/", Token: "installation-token"})
	if err != nil {
		panic(err)
	}
	board := server.NewMemoryBoardStore()
	passed := make(chan server.BoardPass, 1)
	bs, err := server.NewBoardSync(server.BoardSyncConfig{
		Board: board, Forge: fc, Host: "github.com", Repos: []string{"acme/app"}, Interval: 50 * time.Millisecond,
		OnPass: func(p server.BoardPass) {
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
	l := server.ForgeBoardSync()
	done := make(chan error)
	go func() {
		done <- lease.Run(ctx, lease.NewMemoryStore(), lease.Spec{
			Name: l.Name, Owner: "replica-a", TTL: l.TTL(bs.Interval()), Retry: l.Retry(bs.Interval()),
		}, bs.Work)
	}()
	p := <-passed
	cancel()
	<-done

	fmt.Printf("term %d pass %d: %d listed, %d changed\n", p.Term, p.Pass, p.Repos[0].Listed, p.Repos[0].Changed)
	cards, _ := board.Cards(context.Background(), server.BoardQuery{Limit: 10})
	for _, c := range cards {
		fmt.Println(c.ID(), c.State, c.Title, c.Labels)
	}
	// Output:
	// term 1 pass 1: 1 listed, 1 changed
	// github.com/acme/app#1 open crash on start [bug]
}

package forge_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// A Client on the simulator: the sweeper's reads are charged to its lane,
// and the second read of an unchanged pull request is a free 304.
func Example() {
	sim := forgesim.New()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	if err := sim.SeedPull("acme", "app", 12, "3f2a", "open"); err != nil {
		panic(err)
	}

	c, err := forge.New(forge.Config{BaseURL: srv.URL + "/", Token: "demo"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := forge.WithLane(context.Background(), forge.LaneMergeGateSweeper)
	for range 2 {
		pr, err := c.GetPull(ctx, "acme", "app", 12)
		if err != nil {
			panic(err)
		}
		fmt.Println(pr.Number, pr.State, pr.HeadSHA)
	}
	for _, n := range c.Counts() {
		fmt.Println(n.API, n.Lane, n.Code, n.N)
	}
	fmt.Println("simulator received", sim.Requests(forgesim.Filter{Token: "demo"}))
	// Output:
	// 12 open 3f2a
	// 12 open 3f2a
	// REST merge-gate-sweeper 200 1
	// REST merge-gate-sweeper 304 1
	// simulator received 2
}

package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// Example wires one replica: its stores, its forge client, and its elected
// net, the merge-gate sweeper, which Run serves under its lease until the
// context is done, then releases.
func Example() {
	sim := httptest.NewServer(forgesim.New())
	defer sim.Close()
	fc, err := forge.New(forge.Config{BaseURL: sim.URL + "/", Token: "replica-1"})
	if err != nil {
		panic(err)
	}
	events := make(chan lease.Event, 8)
	srv, err := server.New(server.Config{
		Runs:          gaterun.NewMemoryStore(),
		Leases:        lease.NewMemoryStore(),
		Forge:         fc,
		APIToken:      "secret",
		Owner:         "replica-1",
		SweepInterval: time.Minute,
		OnLeaseEvent:  func(e lease.Event) { events <- e },
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Run(ctx, nil) }() // nil listener: serve srv.Handler() yourself
	e := <-events
	fmt.Println(e.Kind, e.Name, e.Owner)
	cancel() // SIGTERM in iterion serve
	if err := <-done; err != nil {
		panic(err)
	}
	for range 2 {
		e := <-events
		fmt.Println(e.Kind, e.Name, e.Reason)
	}
	// Output:
	// elected merge-gate-sweeper replica-1
	// stepped down merge-gate-sweeper ctx_done
	// released merge-gate-sweeper ctx_done
}

// ExampleMergeGateSweeper shows how the sweeper's lease follows its
// interval: TTL three intervals, retry one.
func ExampleMergeGateSweeper() {
	l := server.MergeGateSweeper()
	fmt.Println(l.Name, l.TTL(time.Minute), l.Retry(time.Minute))
	// Output: merge-gate-sweeper 3m0s 1m0s
}

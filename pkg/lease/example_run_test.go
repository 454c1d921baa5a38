package lease_test

import (
	"context"
	"fmt"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// A replica serves terms of one lease: work runs while the lease is held and
// its context is cancelled when the term ends. Here the work stops the whole
// Run after its first pass, so Run steps down, releases and returns.
func ExampleRun() {
	st := lease.NewMemoryStore() // a MongoStore in a deployment of several processes
	ctx, stop := context.WithCancel(context.Background())
	err := lease.Run(ctx, st, lease.Spec{
		Name:  "merge-gate-sweeper",
		Owner: "replica-1",
		TTL:   3 * time.Minute, // renew every minute, step down 2m30s after the last proven renewal
		Retry: time.Minute,     // campaign once a minute
		OnEvent: func(e lease.Event) {
			switch e.Kind {
			case lease.Elected:
				fmt.Println(e.Owner, e.Kind)
			case lease.SteppedDown, lease.Released:
				fmt.Printf("%s %s (%s)\n", e.Owner, e.Kind, e.Reason)
			}
		},
	}, func(ctx context.Context) {
		fmt.Println("first pass of the term: deep")
		stop() // a SIGTERM, say
		<-ctx.Done()
	})
	fmt.Println("Run returned", err)
	hs, _ := st.Holders(context.Background())
	fmt.Println("holders left:", len(hs))
	// Output:
	// replica-1 elected
	// first pass of the term: deep
	// replica-1 stepped down (ctx_done)
	// replica-1 released (ctx_done)
	// Run returned <nil>
	// holders left: 0
}

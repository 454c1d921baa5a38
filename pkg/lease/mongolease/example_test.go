package mongolease_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/pkg/lease/mongolease"
)

// A MongoStore elects among the replicas that share a MongoDB replica set.
// Check the server once at start: a FerretDB server is logged as a test
// server, not a production lease store.
func ExampleNewStore() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://localhost:27017/?replicaSet=rs0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Disconnect(ctx)
	st := mongolease.NewStore(client.Database("iterion"))
	if err := st.CheckServer(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Println(err)
		return
	}
	host, _ := os.Hostname()
	ok, err := st.Acquire(ctx, "merge-gate-sweeper", host, time.Now(), 3*time.Minute)
	fmt.Println(ok, err)
}

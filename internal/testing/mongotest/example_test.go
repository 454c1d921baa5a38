package mongotest_test

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// ExampleStart runs the server as `dev-mongo` (cmd/dev-mongo) does, holds one
// command at the proxy, and shows that it lands only once released.
func ExampleStart() {
	ctx := context.Background()
	srv, err := mongotest.Start(ctx, "127.0.0.1:0", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Disconnect(ctx) }()
	coll := c.Database("example").Collection("docs")

	hold := srv.Proxy().Hold(func(cmd mongotest.Command) bool { return cmd.Name == "insert" })
	inserted := make(chan error)
	go func() {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
		inserted <- err
	}()
	<-hold.Arrived()
	n, _ := coll.CountDocuments(ctx, bson.D{})
	fmt.Println("while held:", n)
	hold.Release()
	fmt.Println("insert error:", <-inserted)
	n, _ = coll.CountDocuments(ctx, bson.D{})
	fmt.Println("after release:", n)
	// Output:
	// while held: 0
	// insert error: <nil>
	// after release: 1
}

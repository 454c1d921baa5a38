package harness

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/pkg/gaterun"
)

// What the clock scenario reads of a cluster beyond the others: the
// sweepers' logged passes, and one direct write to Mongo that ages runs
// out of the shallow window.

// passMsg is the message of a sweeper's logged pass (pkg/server's
// sweep_pass.go).
const passMsg = "sweep pass"

// passLogs reads the sweep passes r logged that ended within [from, to];
// a pass line it cannot read is an error (logRecords).
func (r *replica) passLogs(from, to time.Time) ([]passLog, error) {
	all, err := logRecords[passLog](r.p.stderrPath(), passMsg)
	if err != nil {
		return nil, fmt.Errorf("%s's log: %w", r.name, err)
	}
	var out []passLog
	for _, p := range all {
		if !p.Time.Before(from) && !p.Time.After(to) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ageRuns sets the updated time of the runs of seedRepo whose pull
// request number is above keep to `ago` before now, straight in the
// cluster's Mongo (the database serve uses by default): they leave the
// sweeper's shallow window (the last hour) for the deep one. It returns
// how many runs it aged.
func (c *cluster) ageRuns(ctx context.Context, keep int, ago time.Duration) (int64, error) {
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + c.mongoAddr + "/?" + c.mongoQS))
	if err != nil {
		return 0, fmt.Errorf("%w: connect to Mongo: %w", ErrProcess, err)
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("iterion").Collection(gaterun.Collection)
	res, err := coll.UpdateMany(ctx, bson.D{{Key: "pull", Value: bson.D{{Key: "$gt", Value: keep}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "updated_at", Value: time.Now().Add(-ago).UTC()}}}})
	if err != nil {
		return 0, fmt.Errorf("%w: age runs: %w", ErrProcess, err)
	}
	return res.ModifiedCount, nil
}

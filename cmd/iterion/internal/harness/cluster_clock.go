package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/pkg/gaterun"
)

// What the clock scenario reads of a cluster beyond the others: the
// sweepers' logged passes, and one direct write to Mongo that ages runs
// out of the shallow window.

// passLogs reads the sweep passes r logged that ended within [from, to].
func (r *replica) passLogs(from, to time.Time) ([]passLog, error) {
	f, err := os.Open(r.p.stderr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s's log: %w", ErrMeasure, r.name, err)
	}
	defer f.Close()
	var out []passLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var p passLog
		if json.Unmarshal(sc.Bytes(), &p) != nil || p.Msg != "sweep pass" || p.Time.Before(from) || p.Time.After(to) {
			continue
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s's log: %w", ErrMeasure, r.name, err)
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

package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/pkg/gaterun"
)

// The tenants scenario's seeding at size: its runs written straight into
// the store the replicas share, through gaterun.MongoStore.Put (the call
// POST /api/runs makes), as POST /api/runs would have stored them. Seeding
// is set-up, not measurement: through the API each run costs the store
// two reads (the repository's installation, the offer's runs of its
// head), which dev-mongo answers by scanning the collection, and each
// installation one look-up on the App's JWT, whose CPU-time limit admits
// a few dozen a minute. The churn's added installations are seeded the
// same way: at 1,000 × 10, its runs posted one by one overran dev-mongo.

// storeSeeder writes runs into the store the cluster's replicas share, as
// POST /api/runs would have stored them.
type storeSeeder struct {
	c      *cluster
	client *mongo.Client
	store  *gaterun.MongoStore
	host   string // the replicas' forge host, as they stored the sample
}

// newStoreSeeder connects to the cluster's store and posts sample, the
// first run, to front through POST /api/runs (installation
// installationOf(sample)); the document so stored must equal the one the
// seeder writes for it but for the times: else the error says which fields
// differ. The caller closes the seeder.
func newStoreSeeder(ctx context.Context, c *cluster, front api, sample runRequest, installationOf func(runRequest) int64) (*storeSeeder, error) {
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + c.mongoAddr + "/?" + c.mongoQS))
	if err != nil {
		return nil, fmt.Errorf("%w: connect to Mongo: %w", ErrProcess, err)
	}
	ss := &storeSeeder{c: c, client: client}
	db := client.Database("iterion") // serve's default --mongo-db
	if ss.store, err = gaterun.NewMongoStore(ctx, db); err != nil {
		ss.close(ctx)
		return nil, fmt.Errorf("%w: %w", ErrProcess, err)
	}
	if err := ss.check(ctx, db.Collection(gaterun.Collection), front, sample, installationOf); err != nil {
		ss.close(ctx)
		return nil, err
	}
	return ss, nil
}

// check posts sample through front and writes it again over a fresh
// document: the two must agree but for the times.
func (ss *storeSeeder) check(ctx context.Context, coll *mongo.Collection, front api, sample runRequest, installationOf func(runRequest) int64) error {
	// The sample, through the API: its host is the replicas' forge host.
	if err := seedRuns(ctx, ss.c.sim, front, []runRequest{sample}, 1, ss.c.interval); err != nil {
		return err
	}
	posted, err := runDoc(ctx, coll, sample)
	if err != nil {
		return err
	}
	ss.host, _ = posted["host"].(string)
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: ss.asRun(sample, installationOf).ID}}); err != nil {
		return fmt.Errorf("%w: delete the sample run: %w", ErrProcess, err)
	}
	if _, err := ss.store.Put(ctx, ss.asRun(sample, installationOf), time.Now()); err != nil {
		return fmt.Errorf("%w: %w", ErrProcess, err)
	}
	written, err := runDoc(ctx, coll, sample)
	if err != nil {
		return err
	}
	if diff := docDiff(posted, written, "created_at", "updated_at", "reported_at"); diff != "" {
		return fmt.Errorf("%w: the run written to the store differs from the one POST /api/runs stored: %s", ErrMeasure, diff)
	}
	return nil
}

// asRun is r as POST /api/runs stores it, of installation installationOf(r).
func (ss *storeSeeder) asRun(r runRequest, installationOf func(runRequest) int64) gaterun.Run {
	sha := strings.ToLower(r.HeadSHA)
	return gaterun.Run{ID: gaterun.ID(ss.host, r.Repo, r.Pull, sha), Host: ss.host, Repo: r.Repo, Pull: r.Pull, HeadSHA: sha,
		Context: gaterun.DefaultContext, Verdict: gaterun.Verdict(r.Verdict), Installation: installationOf(r)}
}

// write writes runs, each of installation installationOf(run), into the
// store, with conc writes at once, after the simulator's pull request and
// status of each (as seedRuns).
func (ss *storeSeeder) write(ctx context.Context, runs []runRequest, installationOf func(runRequest) int64, conc int) error {
	failed, first := eachAtOnce(runs, conc, func(r runRequest) error {
		if err := ss.c.sim.seedPull(ctx, r.Repo, r.Pull, r.HeadSHA); err != nil {
			return err
		}
		if err := ss.c.sim.seedStatus(ctx, r.Repo, r.HeadSHA, gateContext, r.Verdict); err != nil {
			return err
		}
		_, err := ss.store.Put(ctx, ss.asRun(r, installationOf), time.Now())
		return err
	})
	if failed > 0 {
		return fmt.Errorf("%w: seeding %d runs into the store: %d failed, the first: %w", ErrProcess, len(runs), failed, first)
	}
	return nil
}

// close disconnects the seeder from the store.
func (ss *storeSeeder) close(ctx context.Context) {
	ss.client.Disconnect(context.WithoutCancel(ctx))
}

// runDoc is the stored document of run r, found by its repository, pull
// request and head.
func runDoc(ctx context.Context, coll *mongo.Collection, r runRequest) (bson.M, error) {
	var doc bson.M
	err := coll.FindOne(ctx, bson.D{{Key: "repo", Value: r.Repo}, {Key: "pull", Value: r.Pull}, {Key: "head_sha", Value: strings.ToLower(r.HeadSHA)}}).Decode(&doc)
	if err != nil {
		return nil, fmt.Errorf("%w: read run %s#%d: %w", ErrMeasure, r.Repo, r.Pull, err)
	}
	return doc, nil
}

// docDiff names the fields of a and b, but skip, whose values differ
// ("" when none).
func docDiff(a, b bson.M, skip ...string) string {
	keys := maps.Clone(a)
	maps.Copy(keys, b)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if slices.Contains(skip, k) {
			continue
		}
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			out = append(out, fmt.Sprintf("%s: %v ≠ %v", k, a[k], b[k]))
		}
	}
	return strings.Join(out, "; ")
}

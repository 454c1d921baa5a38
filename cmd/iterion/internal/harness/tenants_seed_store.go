package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
// a few dozen a minute.

// seedStore writes runs, each of installation installationOf(run), into
// the cluster's store, with conc writes at once, after the simulator's
// pull request and status of each (as seedRuns). One run, the first, is
// also posted to front through POST /api/runs, and its document so stored
// must equal the one written here but for the times: else the error says
// which fields differ.
func seedStore(ctx context.Context, c *cluster, front api, runs []runRequest, installationOf func(runRequest) int64, conc int) error {
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + c.mongoAddr + "/?" + c.mongoQS))
	if err != nil {
		return fmt.Errorf("%w: connect to Mongo: %w", ErrProcess, err)
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	db := client.Database("iterion") // serve's default --mongo-db
	store, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProcess, err)
	}
	if len(runs) == 0 {
		return nil
	}
	// The sample, through the API: its host is the replicas' forge host.
	first := runs[0]
	if err := seedRuns(ctx, c.sim, front, runs[:1], 1, c.interval); err != nil {
		return err
	}
	coll := db.Collection(gaterun.Collection)
	posted, err := runDoc(ctx, coll, first)
	if err != nil {
		return err
	}
	host, _ := posted["host"].(string)
	asRun := func(r runRequest) gaterun.Run {
		sha := strings.ToLower(r.HeadSHA)
		return gaterun.Run{ID: gaterun.ID(host, r.Repo, r.Pull, sha), Host: host, Repo: r.Repo, Pull: r.Pull, HeadSHA: sha,
			Context: gaterun.DefaultContext, Verdict: gaterun.Verdict(r.Verdict), Installation: installationOf(r)}
	}
	// The sample again, written here over a fresh document: the two must
	// agree.
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: asRun(first).ID}}); err != nil {
		return fmt.Errorf("%w: delete the sample run: %w", ErrProcess, err)
	}
	if _, err := store.Put(ctx, asRun(first), time.Now()); err != nil {
		return fmt.Errorf("%w: %w", ErrProcess, err)
	}
	written, err := runDoc(ctx, coll, first)
	if err != nil {
		return err
	}
	if diff := docDiff(posted, written, "created_at", "updated_at"); diff != "" {
		return fmt.Errorf("%w: the run written to the store differs from the one POST /api/runs stored: %s", ErrMeasure, diff)
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan runRequest)
	for range conc {
		wg.Go(func() {
			for r := range next {
				err := c.sim.seedPull(ctx, r.Repo, r.Pull, r.HeadSHA)
				if err == nil {
					err = c.sim.seedStatus(ctx, r.Repo, r.HeadSHA, gateContext, r.Verdict)
				}
				if err == nil {
					_, err = store.Put(ctx, asRun(r), time.Now())
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, r := range runs[1:] {
		next <- r
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%w: seeding %d runs into the store: %d failed, the first: %w", ErrProcess, len(runs), len(errs), errs[0])
	}
	return nil
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

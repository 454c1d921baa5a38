package harness

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
)

// TestTenantsStoreSeederRefusesARunUnlikeTheServers pins the store
// seeder's safeguard, on the embedded MongoDB-wire server: the sample run
// posted through POST /api/runs and the one the seeder writes over a fresh
// document must agree but for the times, else seeding fails naming each
// field that differs, so that a server storing runs otherwise than the
// seeder writes them (a field of its own, another installation) never
// has a benchmark measured on runs it would not have stored. The front
// here stores the sample as the server's store does (gaterun.MongoStore's
// Put) and then changes it as each case says.
func TestTenantsStoreSeederRefusesARunUnlikeTheServers(t *testing.T) {
	// A server of its own: the seeder writes to serve's default database,
	// which ITERION_TEST_MONGO_URI's deployment may hold.
	srv := mongotest.NewServer(t)
	u, err := url.Parse(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	db := srv.Client(t).Database("iterion") // the seeder's, serve's default
	store, err := gaterun.NewMongoStore(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	simMux := http.NewServeMux()
	simMux.HandleFunc("POST /_sim/repos/{owner}/{repo}/pulls", func(w http.ResponseWriter, r *http.Request) {})
	simMux.HandleFunc("POST /_sim/repos/{owner}/{repo}/statuses/{sha}", func(w http.ResponseWriter, r *http.Request) {})
	c := &cluster{interval: time.Second, sim: scriptedSim(simMux), mongoAddr: u.Host, mongoQS: u.RawQuery}
	sample := tenantRuns(1, 1)[0]
	of := func(runRequest) int64 { return 1 }
	for _, tc := range []struct {
		name   string
		change bson.D // what the front's server does to the stored run; nil: nothing
		fields []string
	}{
		{"as the seeder writes it", nil, nil},
		{"a field of the server's own", bson.D{{Key: "$set", Value: bson.D{{Key: "offered_by", Value: "replica-01"}}}}, []string{"offered_by"}},
		{"another installation", bson.D{{Key: "$set", Value: bson.D{{Key: "installation", Value: int64(2)}}}}, []string{"installation"}},
	} {
		if _, err := db.Collection(gaterun.Collection).DeleteMany(t.Context(), bson.D{}); err != nil {
			t.Fatal(err)
		}
		frontMux := http.NewServeMux()
		frontMux.HandleFunc("POST /api/runs", func(w http.ResponseWriter, r *http.Request) {
			var req runRequest
			json.NewDecoder(r.Body).Decode(&req)
			run := gaterun.Run{ID: gaterun.ID("forge.test", req.Repo, req.Pull, req.HeadSHA), Host: "forge.test", Repo: req.Repo, Pull: req.Pull,
				HeadSHA: req.HeadSHA, Context: gaterun.DefaultContext, Verdict: gaterun.Verdict(req.Verdict), Installation: 1}
			if _, err := store.Put(r.Context(), run, time.Now()); err != nil {
				t.Error(err)
			}
			if tc.change != nil {
				if _, err := db.Collection(gaterun.Collection).UpdateOne(r.Context(), bson.D{{Key: "_id", Value: run.ID}}, tc.change); err != nil {
					t.Error(err)
				}
			}
			w.WriteHeader(http.StatusCreated)
		})
		front := api{url: "http://front.invalid", hc: &http.Client{Transport: inMemory{frontMux}}}
		ss, err := newStoreSeeder(t.Context(), c, front, sample, of)
		if ss != nil {
			ss.close(t.Context())
		}
		switch {
		case tc.fields == nil && err != nil:
			t.Errorf("%s: got %v, want the seeder made", tc.name, err)
		case tc.fields != nil && !errors.Is(err, ErrMeasure):
			t.Errorf("%s: got %v, want ErrMeasure: the run the seeder writes differs from the server's", tc.name, err)
		case tc.fields != nil:
			for _, f := range tc.fields {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("%s: got %v, want it to name field %s", tc.name, err, f)
				}
			}
		}
	}
}

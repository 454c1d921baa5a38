package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/forge/mongotokens"
)

// TestServeAppModeSharesInstallationTokensThroughMongo pins the serve
// wiring of the token store: two App-mode replicas on one MongoDB mint one
// token for an installation between them and keep it in
// installation_tokens, minted by the replica's name; with
// --share-installation-tokens=false each mints its own and nothing is
// stored. The App has the one installation: a replica also mints ahead
// the token of every installation its shard terms sweep, whenever the
// terms start, so a second installation's mint would come before the
// counts or after them.
func TestServeAppModeSharesInstallationTokensThroughMongo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  []string
		mints  int64
		stored int64
	}{
		{"shared by default", nil, 1, 1},
		{"sharing off", []string{"--share-installation-tokens=false"}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := mongotest.DB(t)
			sim := forgesim.New()
			const sha = "abc1230000000000000000000000000000000000"
			mustSim := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			mustSim(sim.SeedInstallations(1, 1))
			mustSim(sim.SeedPull("org-1", "repo-1", 12, sha, "open"))
			mustSim(sim.SeedPull("org-1", "repo-1", 13, sha, "open"))
			simSrv := httptest.NewServer(sim)
			defer simSrv.Close()
			key := filepath.Join(t.TempDir(), "app.pem")
			mustSim(os.WriteFile(key, forgetest.AppKey(t), 0o600))
			args := append([]string{"--listen", "127.0.0.1:0", "--forge-url", simSrv.URL + "/", "--mongo-uri", mongotest.URI(t), "--mongo-db", db.Name(),
				"--github-app-id", "1", "--github-private-key-file", key, "--api-token", "api", "--sweep-interval", "1h"}, tc.flags...)
			var stops []func() error
			for i, pull := range []string{"12", "13"} {
				url, log, stop := startServe(t, args)
				stops = append(stops, stop)
				req, _ := http.NewRequest("POST", url+"/api/runs", strings.NewReader(`{"repo": "org-1/repo-1", "pull": `+pull+`, "head_sha": "`+sha+`", "verdict": "success"}`))
				req.Header.Set("Authorization", "Bearer api")
				resp, err := http.DefaultClient.Do(req)
				mustSim(err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Fatalf("POST /api/runs on replica %d = %d %s, want 201", i+1, resp.StatusCode, b)
				}
				if strings.Contains(log.String(), "ghs_sim_") {
					t.Errorf("replica %d's log carries an installation token:\n%s", i+1, log)
				}
			}
			if n := sim.Requests(forgesim.Filter{Route: "POST /app/installations/{id}/access_tokens"}); n != tc.mints {
				t.Errorf("the installation's tokens minted by two replicas: %d, want %d", n, tc.mints)
			}
			coll := db.Collection(mongotokens.Collection)
			n, err := coll.CountDocuments(context.Background(), bson.D{})
			mustSim(err)
			if n != tc.stored {
				t.Errorf("documents in %s: %d, want %d", mongotokens.Collection, n, tc.stored)
			}
			if tc.stored > 0 {
				var doc struct {
					ID       string `bson:"_id"`
					MintedBy string `bson:"minted_by"`
				}
				mustSim(coll.FindOne(context.Background(), bson.D{}).Decode(&doc))
				if doc.ID != "1" || !strings.HasPrefix(doc.MintedBy, "iterion (") {
					t.Errorf("stored token of installation %s minted by %q, want installation 1's, minted by the replica's name", doc.ID, doc.MintedBy)
				}
			}
			for _, stop := range stops {
				if err := stop(); err != nil {
					t.Errorf("serve after the stop signal = %v, want nil", err)
				}
			}
		})
	}
}

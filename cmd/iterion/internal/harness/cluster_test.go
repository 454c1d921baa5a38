package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAReplicaWhosePortIsTakenIsStartedOnAnother pins startReplica's
// rule: the port freeAddr found can be taken before the replica binds it
// (replicas and forwarders start alongside), and whatever answers there
// then is not the replica. Here another server answers /metrics and
// /healthz on the first port given: the replica must not be taken for it,
// and must be started again on another port.
func TestAReplicaWhosePortIsTakenIsStartedOnAnother(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"owner":"impostor"}`))
		}
	}))
	defer impostor.Close()
	c, err := startCluster(ctx, binaries{iterion: bin, devMongo: devMongo}, dir, 500*time.Millisecond, simBudget)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	taken := strings.TrimPrefix(impostor.URL, "http://")
	given := 0
	c.listenAddr = func() (string, error) {
		given++
		if given == 1 {
			return taken, nil
		}
		return freeAddr()
	}
	rs, err := c.startReplicas(ctx, 1, replicaSpec{})
	if err != nil {
		t.Fatalf("got %v, want the replica started on another port", err)
	}
	r := rs[0]
	if r.owner == "impostor" || r.api.url == impostor.URL {
		t.Fatalf("got the replica at %s owned by %q: the server already on its port was taken for it", r.api.url, r.owner)
	}
	if given != 2 {
		t.Errorf("got %d ports asked for, want 2: the taken one, then one the replica bound", given)
	}
	if !r.p.(*proc).logged(`"msg":"listening","owner":"` + r.owner + `","addr":"` + strings.TrimPrefix(r.api.url, "http://") + `"`) {
		t.Errorf("replica %s (%s) did not log listening on its address", r.owner, r.api.url)
	}
}

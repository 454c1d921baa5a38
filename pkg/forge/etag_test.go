package forge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestNotModifiedIsServedFromTheCacheAndCountedAs304(t *testing.T) {
	sim, srv := startSim(t, forgesim.WithBudget(100))
	c := newClient(t, srv, forge.Config{Token: "t"})
	if err := sim.SeedPull("acme", "app", 1, "sha1", "open"); err != nil {
		t.Fatal(err)
	}
	ctx := laneCtx(forge.LaneMergeGateSweeper)
	want := forge.Pull{Number: 1, State: "open", HeadSHA: "sha1"}
	for i := range 3 {
		pr, err := c.GetPull(ctx, "acme", "app", 1)
		if err != nil || pr != want {
			t.Fatalf("read %d: got %+v, %v, want %+v: a 304 is answered from the cached body", i+1, pr, err, want)
		}
	}
	if got200, got304 := countOf(c, forge.LaneMergeGateSweeper, http.StatusOK), countOf(c, forge.LaneMergeGateSweeper, http.StatusNotModified); got200 != 1 || got304 != 2 {
		t.Fatalf("counts: got %d×200 %d×304, want 1×200 2×304: the counts tell 304s apart", got200, got304)
	}
	if got := sim.Stats().Budget.Windows[0].Used; got != 1 {
		t.Fatalf("budget used: got %d, want 1: GitHub does not charge a 304", got)
	}

	if err := sim.PushHead("acme", "app", 1, "sha2"); err != nil {
		t.Fatal(err)
	}
	pr, err := c.GetPull(ctx, "acme", "app", 1)
	if err != nil || pr.HeadSHA != "sha2" {
		t.Fatalf("read after a push: got %+v, %v, want head sha2: a changed resource is a fresh 200, never the stale cache", pr, err)
	}
	if got := countOf(c, forge.LaneMergeGateSweeper, http.StatusOK); got != 2 {
		t.Fatalf("200s counted: got %d, want 2", got)
	}
}

func TestETagCacheIsBoundedByBytes(t *testing.T) {
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bytes    int
		want304s int64
		why      string
	}{
		{1, 0, "an answer bigger than the whole bound is not cached"},
		{0, 2, "the default bound holds it"},
		{-1, 0, "a negative bound is no cache"},
	} {
		c := newClient(t, srv, forge.Config{Token: "a", ETagCacheBytes: tc.bytes})
		for range 3 {
			if _, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1); err != nil {
				t.Fatal(err)
			}
		}
		if got := countOf(c, forge.LaneAPI, http.StatusNotModified); got != tc.want304s {
			t.Errorf("ETagCacheBytes %d, 3 reads: got %d×304, want %d: %s", tc.bytes, got, tc.want304s, tc.why)
		}
	}
}

func TestETagCacheIsPerTokenAndCountsHits(t *testing.T) {
	key := forgetest.AppKey(t)
	for _, tc := range []struct {
		name     string
		ttl      time.Duration
		wantHits float64
		why      string
	}{
		{"one token", time.Hour, 2, "reads after the first are 304s served from the cache"},
		{"a new token per read", 30 * time.Second, 0, "an ETag is sent back only with the token it was issued to (Vary: Authorization), so a rotated token starts cold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := startSim(t, forgesim.WithTokenTTL(tc.ttl))
			if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			c := newClient(t, srv, forge.Config{App: &forge.AppAuth{AppID: 42, InstallationID: 7, PrivateKey: key}, Registerer: reg})
			for range 3 {
				if _, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1); err != nil {
					t.Fatal(err)
				}
			}
			got, err := hitsOf(reg, forge.LaneMergeGateSweeper)
			if err != nil || got != tc.wantHits {
				t.Errorf("forge_etag_hits_total{lane=%q}: got %v (%v), want %v: %s", forge.LaneMergeGateSweeper, got, err, tc.wantHits, tc.why)
			}
			if n304 := sim.Requests(forgesim.Filter{Status: http.StatusNotModified}); float64(n304) != tc.wantHits {
				t.Errorf("304s the simulator sent: got %d, want %v: every hit is one 304", n304, tc.wantHits)
			}
		})
	}
}

// hitsOf is forge_etag_hits_total{lane} in reg; 0 when never counted.
func hitsOf(reg *prometheus.Registry, lane string) (float64, error) {
	mfs, err := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "forge_etag_hits_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == lane {
				return m.GetCounter().GetValue(), err
			}
		}
	}
	return 0, err
}

// TestETagIsSentBackOnlyOnAGETWithItsTokenAndMediaType pins the cache's
// key on the client's side, whatever the forge's ETags cover:
// If-None-Match goes out only on a GET, and only with the Authorization
// and Accept headers the ETag was issued to, so no token is ever served
// another token's answer, nor a media type another's representation, even
// by a forge whose ETag is the same for every token and media type.
func TestETagIsSentBackOnlyOnAGETWithItsTokenAndMediaType(t *testing.T) {
	var mu sync.Mutex
	var sent []string // each request's method, token and If-None-Match
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Accept")+" "+r.Header.Get("If-None-Match"))
		mu.Unlock()
		w.Header().Set("ETag", `W/"same"`)
		if r.Header.Get("If-None-Match") == `W/"same"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv, forge.Config{}) // anonymous: each request's own Authorization reaches the cache
	send := func(method, token, accept string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/thing", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "token "+token)
		req.Header.Set("Accept", accept)
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	const json, diff = "application/vnd.github+json", "application/vnd.github.diff"
	send("GET", "a", json)
	send("GET", "a", json)
	send("GET", "b", json)
	send("GET", "a", diff)
	send("GET", "a", diff)
	send("POST", "a", json)
	want := []string{
		`GET token a ` + json + ` `,
		`GET token a ` + json + ` W/"same"`, // the ETag goes back with its token
		`GET token b ` + json + ` `,         // never with another's
		`GET token a ` + diff + ` `,         // nor with another media type
		`GET token a ` + diff + ` W/"same"`, // but with its own
		`POST token a ` + json + ` `,        // nor on a write
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(sent, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests sent:\ngot  %q\nwant %q\nrule: If-None-Match only on a GET, with the token and the media type its ETag was issued to", sent, want)
	}
}

// TestNotModifiedWithNothingCachedIsAFailedRead pins the answer to a 304
// the cache has no entry for: a forge answering 304 to a GET sent without
// If-None-Match, which gives 304 no meaning ("The 304 (Not Modified)
// status code indicates that a conditional GET or HEAD request has been
// received": RFC 9110, section 15.4.5). The read fails with an error; it
// never returns an empty answer, such as an empty list of issues, and
// never panics.
func TestNotModifiedWithNothingCachedIsAFailedRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotModified)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv, forge.Config{Token: "t"})
	ctx := laneCtx(forge.LaneBoardSync)
	if pr, err := c.GetPull(ctx, "acme", "app", 1); err == nil {
		t.Errorf("GET pull answered 304 with nothing cached: got %+v, no error, want an error", pr)
	}
	if issues, err := c.ListIssues(ctx, "acme", "app", time.Time{}); err == nil {
		t.Errorf("GET issues answered 304 with nothing cached: got %d issues, no error, want an error", len(issues))
	}
}

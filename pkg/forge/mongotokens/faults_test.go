package mongotokens_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/forge/mongotokens"
)

const mintRoute = "POST /app/installations/{id}/access_tokens"

// replica is an AppClient of App 42 on sim's server at url, sharing
// store, with installation 1 listed; its requests have
// forge.RequestTimeout's longest deadline.
func replica(t *testing.T, url string, store forge.TokenStore, owner string) *forge.AppClient {
	t.Helper()
	a, err := forge.NewApp(forge.AppConfig{BaseURL: url + "/", AppID: 42, PrivateKey: forgetest.AppKey(t),
		Tokens: store, Owner: owner, Timeout: forge.ServerTimeout + 5*time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// readIssues reads installation 1's repository's issues with a's Client.
func readIssues(a *forge.AppClient) error {
	c, err := a.Installation(1)
	if err != nil {
		return err
	}
	_, err = c.ListIssues(context.Background(), "org-1", "repo-1", time.Time{})
	return err
}

// TestAReplicaCutOffFromTheStoreMintsItsOwnWithinTheDeadline pins, on the
// MongoDB store behind the test server's proxy, that a replica whose
// token store stalls (a read held unanswered) or cannot be reached (every
// connection refused: the driver waits for a server to select) still
// serves a request within its deadline, with a token it minted itself.
func TestAReplicaCutOffFromTheStoreMintsItsOwnWithinTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(p *mongotest.Proxy) (heal func())
	}{
		{"the read stalls", func(p *mongotest.Proxy) func() {
			h := p.Hold(func(c mongotest.Command) bool {
				return c.Name == "find" && c.Collection == mongotokens.Collection
			})
			return h.Release
		}},
		{"partitioned", func(p *mongotest.Proxy) func() {
			p.Refuse(true)
			return func() { p.Refuse(false) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mongotest.NewServer(t)
			store := mongotokens.NewStore(srv.DB(t))
			sim, web := forgetest.StartSim(t)
			if err := sim.SeedInstallations(1, 1); err != nil {
				t.Fatal(err)
			}
			a := replica(t, web.URL, store, "web-1")
			heal := tc.fault(srv.Proxy())
			defer heal()
			if err := readIssues(a); err != nil {
				t.Fatalf("a read with the store %s: %v, want it sent with a token the replica minted", tc.name, err)
			}
			if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 1 {
				t.Errorf("mints: %d, want 1", n)
			}
		})
	}
}

// TestAWriteWhoseAnswerIsLostServesBothReplicas pins that a fresh token
// whose write landed but whose answer was lost is kept by the replica
// that minted it (the failed write is logged, the request sent) and
// served from the store to another replica, which mints none.
func TestAWriteWhoseAnswerIsLostServesBothReplicas(t *testing.T) {
	srv := mongotest.NewServer(t)
	store := mongotokens.NewStore(srv.DB(t))
	sim, web := forgetest.StartSim(t)
	if err := sim.SeedInstallations(1, 1); err != nil {
		t.Fatal(err)
	}
	one, two := replica(t, web.URL, store, "web-1"), replica(t, web.URL, store, "web-2")
	drop := srv.Proxy().DropAnswer(func(c mongotest.Command) bool {
		return c.Name == "update" && c.Collection == mongotokens.Collection
	})
	if err := readIssues(one); err != nil {
		t.Fatalf("a read whose token's write lost its answer: %v, want it sent", err)
	}
	<-drop.Done()
	if err := readIssues(two); err != nil {
		t.Fatalf("the other replica's read: %v", err)
	}
	if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 1 {
		t.Errorf("mints: %d, want 1: the write landed, and the other replica takes its token", n)
	}
	tok, ok, err := store.Get(context.Background(), 1)
	if err != nil || !ok || tok.MintedBy != "web-1" || !strings.HasPrefix(tok.Token, "ghs_") {
		t.Errorf("stored token: %v (ok %v, %v), want the one web-1 minted", tok, ok, err)
	}
}

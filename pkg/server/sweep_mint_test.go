package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// The tests of the mint hold's end when its installation leaves a
// replica's sweep. TestAppModeAMintRefusedWhileTheInstallationIsThereBacksOff
// pins the hold itself and its end by a mint or a webhook. In both, tokens
// live 10 minutes, so a token is asked for every few passes, and refused
// mints are counted on the simulator: a hold's doubling carried over shows
// as one refusal in a quarter of an hour, a fresh hold as one after 1, 2,
// 4 and 8 intervals.

// refusingMints starts a cluster of installations 1 and 2, tokens living
// 10 minutes, with one replica sweeping every interval on 2 shards, and
// after three and a half intervals has the simulator refuse the mints of
// ids 403 while it keeps the installations.
func refusingMints(t *testing.T, interval time.Duration, ids ...int64) (*cluster, http.RoundTripper) {
	t.Helper()
	c, next := newAppCluster(t, 2, true, forgesim.WithTokenTTL(10*time.Minute))
	startAppReplicas(t, c, next, 1, interval, 2, nil)
	time.Sleep(3*interval + interval/2)
	synctest.Wait()
	for _, id := range ids {
		if err := c.sim.RefuseMints(id, true); err != nil {
			t.Fatal(err)
		}
	}
	return c, next
}

// refusedMints is how many token mints c's simulator has refused 403.
func refusedMints(c *cluster) int64 {
	return c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden})
}

// TestAppModeAMintHoldEndsWhenAReListDropsTheInstallation pins that the
// hold of an installation's mints, doubled up to the re-list period after
// two hours of refusals, ends when it leaves the replica's sweep: removed
// on GitHub, its removal's webhook lost, the hourly re-list drops it; added
// again, the next re-list brings it back, and its sweeper asks for its
// token at once and, refused again, holds its mints back one interval, not
// an hour.
func TestAppModeAMintHoldEndsWhenAReListDropsTheInstallation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, _ := refusingMints(t, interval, 1)
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(2 * time.Hour) // holds of 1, 2, ..., 32 intervals, then of an hour
		synctest.Wait()
		if n := refusedMints(c); n < 3 || n > 8 {
			t.Fatalf("mints refused in two hours: %d, want 3 to 8: the hold doubles up to an hour (setup)", n)
		}

		// The simulator sends no webhook here: only the re-list, hourly,
		// tells the replica the installation is gone, and then back.
		if err := c.sim.RemoveInstallation(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, err := r.app.Installation(1); err == nil {
			t.Fatal("installation 1 still known an hour after its removal, want the re-list to drop it (setup)")
		}
		if err := c.sim.AddInstallation(1, "org-1", appRun(1).Repo); err != nil {
			t.Fatal(err)
		}
		if err := c.sim.RefuseMints(1, true); err != nil {
			t.Fatal(err)
		}
		// The next re-list brings it back, within the hour: look each
		// interval, then count the refusals of the quarter hour after.
		back := false
		for range time.Hour / interval {
			time.Sleep(interval)
			synctest.Wait()
			if _, err := r.app.Installation(1); err == nil {
				back = true
				break
			}
		}
		if !back {
			t.Fatal("installation 1 not known an hour after it was added again, want the re-list to bring it back (setup)")
		}
		before := refusedMints(c)
		time.Sleep(15 * interval)
		synctest.Wait()
		if n := refusedMints(c) - before; n < 2 {
			t.Errorf("mints refused once the re-list brought installation 1 back: %d in a quarter of an hour, want 2 or more: "+
				"its hold ended when the re-list dropped it from the sweep, so it is asked for at once and the next refusal holds one interval, not an hour", n)
		}
	})
}

// TestAppModeAMintHoldStaysWithTheReplicaNotTheShard pins that a mint hold
// is the sweeping replica's own, and ends when the installation's shard
// leaves it: replica-1, alone, holds both shards and, after two hours of
// refusals, holds back the mints of both installations for an hour; when
// replica-2 joins and takes one shard, it asks for that installation's
// token at once and holds it back one interval after a refusal, doubling
// from there; when replica-2 stops and the shard comes back to
// replica-1, replica-1 does the same: the hold it had when the shard left
// ended then.
func TestAppModeAMintHoldStaysWithTheReplicaNotTheShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		if server.InstallationShard(1, shards) == server.InstallationShard(2, shards) {
			t.Fatal("installations 1 and 2 share a shard: the test needs one on each (setup)")
		}
		c, next := refusingMints(t, interval, 1, 2)
		a := c.replicas[0]
		defer a.stop()
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		// Each installation now holds an hour, so the one left on
		// replica-1 below is refused at most once in any window here.
		const window = 20 * interval
		held := func(owner string) int {
			hs, err := c.leases.Holders(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, h := range hs {
				for i := range shards {
					if h.Name == lease.ShardName(server.MergeGateSweeper().Name, shards, i) && h.Owner == owner && time.Now().Before(h.Expires) {
						n++
					}
				}
			}
			return n
		}

		before := refusedMints(c)
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		b := c.replicas[1]
		defer b.stop()
		time.Sleep(window)
		synctest.Wait()
		if held(b.owner) != 1 {
			t.Fatalf("%s holds %d shards %v after joining, want 1 (setup)", b.owner, held(b.owner), window)
		}
		if n := refusedMints(c) - before; n < 3 {
			t.Errorf("mints refused in the %v after %s took a shard: %d, want 3 or more: the new holder asks for its installation's token at once and holds one interval after a refusal; the old holder's hour-long hold does not move with the shard",
				window, b.owner, n)
		}

		before = refusedMints(c)
		b.stop()
		time.Sleep(window)
		synctest.Wait()
		if held(a.owner) != shards {
			t.Fatalf("%s holds %d shards %v after %s stopped, want %d (setup)", a.owner, held(a.owner), window, b.owner, shards)
		}
		if n := refusedMints(c) - before; n < 3 {
			t.Errorf("mints refused in the %v after the shard came back to %s: %d, want 3 or more: its hold ended when the shard left it, so it asks for the token at once and holds one interval after a refusal, not the hour it held before",
				window, a.owner, n)
		}
	})
}

// TestAppModeATermsFirstRefusedMintIsCheckedAndCounted pins that every
// token mint GitHub refuses 403 is followed by the check with GitHub and,
// the installation there, counted in
// merge_gate_installation_mints_refused_total, the mint a shard term makes
// ahead of an installation's first pass (mintAhead) included. With
// installation 1's mints refused from the start, its term's start costs
// one refused mint and one check: the first pass asks for no token while
// the hold that check set stands, also when GitHub answers the check
// after that pass is due (the pass waits for it rather than minting
// again beside it). Over the next intervals, refused mints, checks and
// the count stay equal.
func TestAppModeATermsFirstRefusedMintIsCheckedAndCounted(t *testing.T) {
	const interval, shards = time.Minute, 2
	off := server.PassOffset(1, interval)
	for _, tc := range []struct {
		name string
		late bool // the check answered an interval less half the offset after it is made
	}{
		{"GitHub answering the check at once", false},
		// The check, made at the election, is answered after the first
		// pass is due (one interval less the offset after it), and
		// before the next: as when it waits its turn on the App's JWT
		// behind many installations' mints.
		{"GitHub answering the check after the first pass is due", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if off < 2*time.Second {
					t.Fatalf("installation 1's offset is %v: the test needs room between its first pass and the check's answer (setup)", off)
				}
				c, next := newAppCluster(t, 2, true)
				if err := c.sim.RefuseMints(1, true); err != nil {
					t.Fatal(err)
				}
				if tc.late {
					next = slowPath{next: next, path: "/app/installations/1", d: interval - off/2}
				}
				startAppReplicas(t, c, next, 1, interval, shards, func(cfg *server.Config) { cfg.OfferTimeout = interval })
				r := c.replicas[0]
				defer r.stop()
				checks := func() int64 { return c.sim.Requests(forgesim.Filter{Route: getInstallationRoute}) }
				counted := func() int64 {
					return int64(metricValue(t, r.handler, "merge_gate_installation_mints_refused_total"))
				}
				var elected time.Time
				for elected.IsZero() {
					time.Sleep(time.Second)
					synctest.Wait()
					for _, e := range shardTerms(c) {
						if e.Shard == server.InstallationShard(1, shards) {
							elected = e.At
						}
					}
				}
				// Half an interval past the first pass, before the next.
				time.Sleep(time.Until(elected.Add(interval - off + interval/2)))
				synctest.Wait()
				if n, m, k := refusedMints(c), checks(), counted(); n != 1 || m != 1 || k != 1 {
					t.Errorf("in the term's first interval: %d refused mints, %d checks, %d counted, want 1, 1 and 1: the mint ahead of the first pass is checked and held as the pass's would be, and the pass mints nothing while the hold stands", n, m, k)
				}
				if p := sweptBy(c, 1); len(p) != 0 {
					t.Errorf("installation 1 swept at %v with its mints refused, want no pass", p[0].At)
				}

				// Past the refusals after holds of 1, 2 and 4 intervals, and
				// their checks' answers, before the one after a hold of 8.
				time.Sleep(10 * interval)
				synctest.Wait()
				n, m, k := refusedMints(c), checks(), counted()
				if n < 3 {
					t.Fatalf("mints refused: %d, want 3 or more: one after each hold (setup)", n)
				}
				if m != n || k != n {
					t.Errorf("%d refused mints, %d checks, %d counted, want them equal: each mint GitHub refuses is checked and counted", n, m, k)
				}
			})
		})
	}
}

// slowPath is a transport to the simulator that holds each request for
// path d before passing it on (slept in virtual time; a request whose
// context ends first is not sent): a request answered that late, where
// the simulator's latency, as GitHub, ends a request at 10 s.
type slowPath struct {
	next http.RoundTripper
	path string
	d    time.Duration
}

func (s slowPath) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == s.path {
		t := time.NewTimer(s.d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, req.Context().Err()
		}
	}
	return s.next.RoundTrip(req)
}

// overlapCountingTokens is a token store whose reads each take a
// millisecond and are counted while they overlap: the most at once.
type overlapCountingTokens struct {
	forge.MemoryTokenStore
	mu        sync.Mutex
	now, most int
	reads     int
}

func (s *overlapCountingTokens) Get(ctx context.Context, id int64) (forge.InstallationToken, bool, error) {
	s.mu.Lock()
	s.now++
	s.reads++
	s.most = max(s.most, s.now)
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	s.now--
	s.mu.Unlock()
	return s.MemoryTokenStore.Get(ctx, id)
}

func (s *overlapCountingTokens) counts() (most, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most, s.reads
}

// TestAppModeATermsMintsAheadReadTheTokenStoreAFewAtATime pins the bound
// on a shard term's mints ahead (mintAhead): a term that gets many
// installations reads their stored tokens server.MintAheadConcurrency at a
// time, not all at once. All at once, a replica taking every shard of
// 1,000 installations sent 1,000 reads to the store together; 430 missed
// the 2 s a token read may take (tokenStoreWait), and each became a mint,
// one at a time through the App JWT, which with the other replicas'
// starts took GitHub's CPU-time limit (docs/benchmarks.md, the
// 1,000-installation run of 2026-12-05: 402 refusals). Every
// installation's token is still read before its first pass.
func TestAppModeATermsMintsAheadReadTheTokenStoreAFewAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, interval = 40, time.Minute
		c, next := newAppCluster(t, n, true)
		tokens := &overlapCountingTokens{}
		r := &replica{owner: "replica-1"}
		reg := prometheus.NewRegistry()
		app, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", Next: next, AppID: appID, PrivateKey: forgetest.AppKey(t), Registerer: reg, Tokens: tokens})
		if err != nil {
			t.Fatalf("forge.NewApp: %v", err)
		}
		r.app = app
		c.start(t, r, server.Config{Runs: c.runs, Leases: c.leases, App: app, SweepShards: 1, APIToken: apiToken, WebhookSecret: webhookSecret,
			Owner: r.owner, SweepInterval: interval, Registry: reg, OnLeaseEvent: c.tl.onEvent, OnSweep: c.tl.onSweep}, nil)
		defer r.stop()
		time.Sleep(interval / 2)
		synctest.Wait()
		most, reads := tokens.counts()
		if most > server.MintAheadConcurrency {
			t.Errorf("token store reads at once at the term's start: %d, want at most %d (server.MintAheadConcurrency)", most, server.MintAheadConcurrency)
		}
		if reads < n {
			t.Errorf("token store reads in the term's first half interval: %d, want every one of the %d installations' tokens read ahead of its first pass", reads, n)
		}
	})
}

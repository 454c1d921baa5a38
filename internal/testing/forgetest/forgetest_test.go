package forgetest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
)

// TestLaneCountCountsOneLaneByCode pins LaneCount's filter: the requests of
// the lane asked for, all of them with code 0, else those answered code;
// another lane's are not counted.
func TestLaneCountCountsOneLaneByCode(t *testing.T) {
	sim, srv := forgetest.StartSim(t)
	for _, n := range []int{1, 3} {
		if err := sim.SeedPull("acme", "app", n, "aaa", "open"); err != nil {
			t.Fatal(err)
		}
	}
	fc := forgetest.NewForge(t, srv.URL+"/", nil, "tok", nil, nil)
	t.Cleanup(fc.Close)
	a := forge.WithLane(context.Background(), "a")
	b := forge.WithLane(context.Background(), "b")
	for _, n := range []int{1, 3} {
		if _, err := fc.GetPull(a, "acme", "app", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fc.GetPull(a, "acme", "app", 2); !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("GetPull of a missing pull = %v, want ErrNotFound", err)
	}
	if _, err := fc.GetPull(b, "acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lane string
		code int
		want int64
	}{{"a", 0, 3}, {"a", http.StatusOK, 2}, {"a", http.StatusNotFound, 1}, {"b", 0, 1}, {"b", http.StatusNotFound, 0}, {"c", 0, 0}} {
		if got := forgetest.LaneCount(fc, c.lane, c.code); got != c.want {
			t.Errorf("LaneCount(%q, %d) = %d, want %d", c.lane, c.code, got, c.want)
		}
	}
}

// TestLoggedAndNotOnceReadTheRecords pins the log sink's two counts:
// Logged counts the records whose message is msg exactly, and NotOnce
// returns every record that carries attr zero times or twice.
func TestLoggedAndNotOnceReadTheRecords(t *testing.T) {
	logger, logs := forgetest.TextLogger()
	logger.Info("sync done", "owner", "a")
	logger.Debug("sync done", "owner", "a")
	logger.Info("sync", "owner", "a")
	logger.Info("syncing", "owner", "a")
	logger.Info("sync started")
	logger.Warn("sync failed", "owner", "a", "owner", "a")
	for msg, want := range map[string]int{"sync done": 2, "sync": 1, "syncing": 1, "sync started": 1, "sync f": 0} {
		if got := logs.Logged(msg); got != want {
			t.Errorf("Logged(%q) = %d, want %d", msg, got, want)
		}
	}
	bad := logs.NotOnce("owner=a")
	if len(bad) != 2 || !strings.Contains(bad[0], `msg="sync started"`) || !strings.Contains(bad[1], `msg="sync failed"`) {
		t.Errorf("NotOnce(owner=a) = %q, want the records of sync started (none) and sync failed (twice)", bad)
	}
}

// TestInFlightCountsTheMostAtOnce pins InFlight: of the requests Match
// picks, it keeps the most in flight at once (three together, then one
// alone: three) and when each began, holding each Hold; a request Match
// does not pick goes straight through, uncounted.
func TestInFlightCountsTheMostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &forgetest.InFlight{
			Next:  answer{},
			Match: func(r *http.Request) bool { return r.URL.Path == "/held" },
			Hold:  time.Second,
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, path := range []string{"/held", "/held", "/held", "/free"} {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, "http://sim.invalid"+path, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if path == "/free" && time.Since(start) != 0 {
					t.Errorf("a request Match does not pick took %v, want no hold", time.Since(start))
				}
			})
		}
		wg.Wait()
		if got := time.Since(start); got != time.Second {
			t.Errorf("the held requests ended after %v, want 1s: each held Hold", got)
		}
		later := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://sim.invalid/held", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if most := tr.Most(); most != 3 {
			t.Errorf("Most = %d, want 3: the three held requests were in flight at once, the fourth alone", most)
		}
		if began := tr.Began(); len(began) != 4 || !began[0].Equal(start) || !began[2].Equal(start) || !began[3].Equal(later) {
			t.Errorf("Began = %v, want three requests begun at %v and one at %v", began, start, later)
		}
	})
}

// answer is a transport answering 204 at once.
type answer struct{}

func (answer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusNoContent, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// TestPipeNetConnectsUntilClosed pins PipeNet's listener contract: a Dial
// is one connection Accept returns, the two ends joined; a Dial nobody
// accepts ends with its context; after Close, which may come twice, Accept
// and Dial fail with net.ErrClosed.
func TestPipeNetConnectsUntilClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := forgetest.NewPipeNet()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := pn.Accept()
			if err != nil {
				t.Error(err)
			}
			accepted <- c
		}()
		client, err := pn.Dial(context.Background(), "tcp", "sim")
		if err != nil {
			t.Fatal(err)
		}
		server := <-accepted
		go func() { _, _ = client.Write([]byte("hi")); client.Close() }()
		if got, err := io.ReadAll(server); err != nil || string(got) != "hi" {
			t.Errorf("server read %q, %v; want hi: the two ends are joined", got, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := pn.Dial(ctx, "tcp", "sim"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Dial nobody accepts = %v, want the context's error", err)
		}
		if err := pn.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pn.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := pn.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
		if _, err := pn.Dial(context.Background(), "tcp", "sim"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Dial after Close = %v, want net.ErrClosed", err)
		}
	})
}

package forge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

func TestMalformedAnswerIsAnErrorAndCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"number": "twelve", "head": `))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv, forge.Config{Token: "t"})
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 12)
	if err == nil {
		t.Fatal("GetPull of a malformed document: got no error, want one")
	}
	if got := countOf(c, forge.LaneWebhook, 200); got != 1 {
		t.Fatalf("counts: got %d×200, want 1: the request was sent and answered, whatever its body", got)
	}
}

func TestStalledForgeIsCountedWhenTheCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	c := newClient(t, srv, forge.Config{Token: "t"})
	ctx, cancel := context.WithTimeout(laneCtx(forge.LaneMergeGateSweeper), 50*time.Millisecond)
	defer cancel()
	_, err := c.GetPull(ctx, "acme", "app", 12)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetPull on a stalled forge: got %v, want context.DeadlineExceeded", err)
	}
	if got := countOf(c, forge.LaneMergeGateSweeper, 0); got != 1 {
		t.Fatalf("counts: got %d with code 0, want 1: a request sent and never answered is counted as an error", got)
	}
}

// TestEmptyGraphQLAnswerIsAnErrorNotNotFound pins that a GraphQL 200 that
// says nothing of the pull requests asked for (neither data nor errors,
// or a null no error explains) fails the read with ErrEmptyAnswer, never
// ErrNotFound, which would push existing pull requests into back-off.
func TestEmptyGraphQLAnswerIsAnErrorNotNotFound(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"neither data nor errors", `{}`},
		{"data null, no errors", `{"data": null}`},
		{"an alias null, no errors", `{"data": {"p0": null, "rateLimit": {"cost": 1}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(c.body))
			}))
			t.Cleanup(srv.Close)
			fc := newClient(t, srv, forge.Config{Token: "t"})
			states, err := fc.PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 12}})
			if err == nil && len(states) == 1 {
				err = states[0].Err
			}
			if !errors.Is(err, forge.ErrEmptyAnswer) || errors.Is(err, forge.ErrNotFound) {
				t.Errorf("PullStates on %s: got %v, want ErrEmptyAnswer and not ErrNotFound: an empty answer is a failed read", c.body, err)
			}
		})
	}
}

package server_test

// The issues webhook takes a deleted or transferred issue's card off the
// board at once; in virtual time, with GitHub's recorded payloads.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/githubcontract"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/server"
)

// The repositories of the recorded issues payloads, as the board names
// them: in another case than the payloads, which GitHub takes for the same
// repository. Each payload concerns the issue numbered 1.
const (
	deletedRepo     = "codertocat/hello-world" // issues.deleted: Codertocat/Hello-World
	transferredRepo = "Octo-Org/Octo-Repo"     // issues.transferred: octo-org/octo-repo
)

// issuesPayload is GitHub's recorded issues payload of action, with each
// of edit applied to its decoded JSON object.
func issuesPayload(t *testing.T, action string, edit ...func(map[string]any)) string {
	t.Helper()
	b, err := githubcontract.Payload("issues", action)
	if err != nil {
		t.Fatal(err)
	}
	if len(edit) == 0 {
		return string(b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, e := range edit {
		e(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// issuesHeaders are the headers GitHub sends with issues event body as
// delivery id, signed with secret.
func issuesHeaders(id, secret, body string) map[string]string {
	return map[string]string{"X-GitHub-Event": "issues", "Content-Type": "application/json",
		"X-Hub-Signature-256": sign(secret, body), "X-GitHub-Delivery": id}
}

// boardWith stores cards 1 and 2 of each of repos on github.com in a new
// board.MemoryStore.
func boardWith(t *testing.T, repos ...string) *board.MemoryStore {
	t.Helper()
	st := board.NewMemoryStore()
	for _, repo := range repos {
		for n := 1; n <= 2; n++ {
			c := board.Card{Host: "github.com", Repo: repo, Number: n, Title: "an issue", State: "open", Updated: time.Now()}
			if _, err := st.Put(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

// hasCard reports whether st holds the card of issue number of repo.
func hasCard(t *testing.T, st board.Store, repo string, number int) bool {
	t.Helper()
	cards, err := st.Cards(context.Background(), board.Query{Host: "github.com", Repo: repo, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards {
		if c.Number == number {
			return true
		}
	}
	return false
}

// onBoard serves the board of repos from st, counting into reg.
func onBoard(st board.Store, reg *prometheus.Registry, repos ...string) func(*server.Config) {
	return func(c *server.Config) { c.Board, c.BoardRepos, c.Registry = st, repos, reg }
}

func TestIssuesWebhookRemovesTheCardOfAnIssueGone(t *testing.T) {
	for _, c := range []struct {
		action, repo, why string
	}{
		{"deleted", deletedRepo, "a deleted issue has no card left to show"},
		{"transferred", transferredRepo, "a transferred issue is no longer the repository's: its card goes, the new repository's sync shows it there"},
	} {
		t.Run(c.action, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				st := boardWith(t, deletedRepo, transferredRepo)
				p := newPipeServer(t, onBoard(st, reg, deletedRepo, transferredRepo))
				defer p.stop()
				body := issuesPayload(t, c.action)
				code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-"+c.action, webhookSecret, body), body)
				if code != http.StatusOK || !strings.Contains(resp, `"removed":true`) || !strings.Contains(resp, `"card":"github.com/`+strings.ToLower(c.repo)+`#1"`) {
					t.Errorf("issues %s: got %d %s, want 200 removed card 1 of %s: %s", c.action, code, resp, c.repo, c.why)
				}
				if hasCard(t, st, c.repo, 1) {
					t.Errorf("card 1 of %s after issues %s: still there, want removed: %s", c.repo, c.action, c.why)
				}
				if !hasCard(t, st, c.repo, 2) {
					t.Errorf("card 2 of %s after issues %s of the first issue: gone, want kept: only the issue the event names is removed", c.repo, c.action)
				}
				if got := deliveriesOutcome(t, reg, "processed"); got != 1 {
					t.Errorf("webhook_deliveries_total{outcome=\"processed\"}: got %v, want 1: a card removed is a delivery processed", got)
				}
			})
		})
	}
}

// TestIssuesWebhookRemovalOutlivesARacingPass pins the webhook's side of
// the race with a board pass that read the issue before it went: the pass
// storing that read after the removal does not put the card back. The
// read may be as late as the payload's issue.updated_at, on GitHub's
// clock, however far behind it this replica's clock is (here, years).
func TestIssuesWebhookRemovalOutlivesARacingPass(t *testing.T) {
	for _, action := range []string{"deleted", "transferred"} {
		t.Run(action, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				body := issuesPayload(t, action)
				var payload struct {
					Repository struct {
						FullName string `json:"full_name"`
					} `json:"repository"`
					Issue struct {
						UpdatedAt time.Time `json:"updated_at"`
					} `json:"issue"`
				}
				if err := json.Unmarshal([]byte(body), &payload); err != nil {
					t.Fatal(err)
				}
				repo, last := payload.Repository.FullName, payload.Issue.UpdatedAt
				if !last.After(time.Now()) {
					t.Fatalf("payload's issue.updated_at %v is not after the bubble's clock %v: the test needs this replica's clock behind GitHub's", last, time.Now())
				}
				st := board.NewMemoryStore()
				stored := board.Card{Host: "github.com", Repo: repo, Number: 1, Title: "as the last pass read it", State: "open", Updated: last.Add(-time.Hour)}
				if _, err := st.Put(context.Background(), stored); err != nil {
					t.Fatal(err)
				}
				p := newPipeServer(t, onBoard(st, prometheus.NewRegistry(), repo))
				defer p.stop()
				if code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-race-"+action, webhookSecret, body), body); code != http.StatusOK || !strings.Contains(resp, `"removed":true`) {
					t.Fatalf("issues %s: got %d %s, want 200 removed", action, code, resp)
				}
				racing := stored
				racing.Title, racing.Updated = "as a pass read it just before it went", last
				if changed, err := st.Put(context.Background(), racing); err != nil || changed {
					t.Errorf("Put of the racing pass's read (updated %v) after the webhook = %v, %v, want false, nil: a read from before the issue went does not put its card back", last, changed, err)
				}
				if hasCard(t, st, repo, 1) {
					t.Errorf("card 1 of %s after the racing pass: back, want removed until a read updated after the removal", repo)
				}
			})
		})
	}
}

// TestIssuesWebhookRemovalIsNoEarlierThanThisReplicasClock pins the
// other half of the removal's date: the later of the payload's
// issue.updated_at and this replica's clock. A payload without
// issue.updated_at still removes the card, dated now, and a pass's read
// from before it stays barred; without the replica's clock the removal
// would have no date, be refused, and be answered 503 at every
// redelivery.
func TestIssuesWebhookRemovalIsNoEarlierThanThisReplicasClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := issuesPayload(t, "deleted", func(m map[string]any) { delete(m["issue"].(map[string]any), "updated_at") })
		st := boardWith(t, deletedRepo)
		p := newPipeServer(t, onBoard(st, prometheus.NewRegistry(), deletedRepo))
		defer p.stop()
		if code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-no-updated-at", webhookSecret, body), body); code != http.StatusOK || !strings.Contains(resp, `"removed":true`) {
			t.Fatalf("issues deleted without issue.updated_at: got %d %s, want 200 removed: the removal is dated this replica's clock", code, resp)
		}
		read := board.Card{Host: "github.com", Repo: deletedRepo, Number: 1, Title: "read before it went", State: "open", Updated: time.Now()}
		if changed, err := st.Put(context.Background(), read); err != nil || changed {
			t.Errorf("Put of a read updated at the removal's instant = %v, %v, want false, nil: the removal bars reads up to this replica's clock", changed, err)
		}
	})
}

func TestIssuesWebhookLeavesOtherCardsAlone(t *testing.T) {
	for _, c := range []struct {
		name     string
		body     func(t *testing.T) string
		secret   string
		repos    []string
		wantCode int
		why      string
	}{
		{"another action", func(t *testing.T) string {
			return issuesPayload(t, "deleted", func(m map[string]any) { m["action"] = "closed" })
		}, webhookSecret, []string{deletedRepo}, http.StatusAccepted, "a closed issue keeps its card, which the sync marks closed"},
		{"repository not on the board", func(t *testing.T) string {
			return issuesPayload(t, "deleted", func(m map[string]any) {
				m["repository"].(map[string]any)["full_name"] = "acme/other"
			})
		}, webhookSecret, []string{deletedRepo}, http.StatusAccepted, "an issue of another repository is none of the board's"},
		{"no board", func(t *testing.T) string { return issuesPayload(t, "deleted") },
			webhookSecret, nil, http.StatusAccepted, "without --board-repos the issues event is ignored"},
		{"wrong signature", func(t *testing.T) string { return issuesPayload(t, "deleted") },
			"not-the-secret", []string{deletedRepo}, http.StatusUnauthorized, "the signature is checked first: no one without the secret removes a card"},
		{"no issue number", func(t *testing.T) string {
			return issuesPayload(t, "deleted", func(m map[string]any) { delete(m, "issue") })
		}, webhookSecret, []string{deletedRepo}, http.StatusBadRequest, "a deleted event that names no issue removes nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := boardWith(t, deletedRepo)
				p := newPipeServer(t, onBoard(st, prometheus.NewRegistry(), c.repos...))
				defer p.stop()
				body := c.body(t)
				code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-1", c.secret, body), body)
				if code != c.wantCode {
					t.Errorf("got %d %s, want %d: %s", code, resp, c.wantCode, c.why)
				}
				if !hasCard(t, st, deletedRepo, 1) {
					t.Errorf("card 1 of %s: gone, want kept: %s", deletedRepo, c.why)
				}
			})
		})
	}
}

// stallingBoard is a board store whose removals wait delay first; while
// stall is set, they do not answer until their context ends. It counts
// the removals that reached the store.
type stallingBoard struct {
	*board.MemoryStore
	stall   atomic.Bool
	delay   time.Duration
	removes atomic.Int64
}

func (s *stallingBoard) Remove(ctx context.Context, host, repo string, number int, gone time.Time) (bool, error) {
	time.Sleep(s.delay)
	if s.stall.Load() {
		<-ctx.Done()
		return false, ctx.Err()
	}
	s.removes.Add(1)
	return s.MemoryStore.Remove(ctx, host, repo, number, gone)
}

func TestIssuesWebhookStoreNotAnsweringIs503AndTheCardStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		st := &stallingBoard{MemoryStore: boardWith(t, deletedRepo)}
		st.stall.Store(true)
		p := newPipeServer(t, onBoard(st, reg, deletedRepo))
		defer p.stop()
		body := issuesPayload(t, "deleted")
		start := time.Now()
		code, h, resp := p.postHeader(t, "/webhooks/github", issuesHeaders("guid-1", webhookSecret, body), body)
		if took := time.Since(start); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || took != server.DefaultStoreTimeout {
			t.Errorf("board store not answering: got %d %s (Retry-After %q) after %v, want 503 with Retry-After after --store-timeout %v",
				code, resp, h.Get("Retry-After"), took, server.DefaultStoreTimeout)
		}
		if !hasCard(t, st, deletedRepo, 1) {
			t.Errorf("card 1 after a removal the store did not answer: gone, want kept")
		}
		if got := deliveriesOutcome(t, reg, "unavailable"); got != 1 {
			t.Errorf("webhook_deliveries_total{outcome=\"unavailable\"}: got %v, want 1: the 503 is counted", got)
		}
		st.stall.Store(false)
		time.Sleep(server.ClaimHold(server.DefaultStoreTimeout, 10*time.Second)) // the claim's hold: it was not completed, so it lapses
		code, resp = p.post(t, "/webhooks/github", issuesHeaders("guid-1", webhookSecret, body), body)
		if code != http.StatusOK || hasCard(t, st, deletedRepo, 1) {
			t.Errorf("redelivery once the claim lapsed: got %d %s, card there %v, want 200 and the card removed: a delivery not processed is processed on redelivery",
				code, resp, hasCard(t, st, deletedRepo, 1))
		}
	})
}

func TestIssuesWebhookSlowStoreIsAnsweredInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		st := &stallingBoard{MemoryStore: boardWith(t, deletedRepo), delay: 4 * time.Second}
		const answerWithin = 2 * time.Second
		p := newPipeServer(t, onBoard(st, reg, deletedRepo), func(c *server.Config) {
			c.WebhookAnswerWithin, c.StoreTimeout = answerWithin, 5*time.Second
		})
		defer p.stop()
		body := issuesPayload(t, "deleted")
		start := time.Now()
		code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-slow", webhookSecret, body), body)
		if took := time.Since(start); code != http.StatusAccepted || took != answerWithin || !strings.Contains(resp, `"processing":"guid-slow"`) {
			t.Errorf("removal taking 4 s: got %d %s after %v, want 202 processing after %v: a delivery is answered within --webhook-answer-within",
				code, resp, took, answerWithin)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if hasCard(t, st, deletedRepo, 1) {
			t.Errorf("card 1 after the slow removal ended: still there, want removed: the processing goes on after the answer")
		}
		for _, c := range []struct {
			outcome string
			want    float64
		}{{"answered_before_processed", 1}, {"processed_after_answer", 1}, {"processed", 0}} {
			if got := deliveriesOutcome(t, reg, c.outcome); got != c.want {
				t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want %v: a removal answered early counts as any delivery does", c.outcome, got, c.want)
			}
		}
	})
}

func TestIssuesWebhookDuplicateIsNotProcessedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		st := &stallingBoard{MemoryStore: boardWith(t, deletedRepo)}
		p := newPipeServer(t, onBoard(st, reg, deletedRepo))
		defer p.stop()
		body := issuesPayload(t, "deleted")
		if code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-1", webhookSecret, body), body); code != http.StatusOK {
			t.Fatalf("first delivery: got %d %s, want 200", code, resp)
		}
		// The same body under a fresh id: X-GitHub-Delivery is not signed.
		code, resp := p.post(t, "/webhooks/github", issuesHeaders("guid-2", webhookSecret, body), body)
		if code != http.StatusOK || !strings.Contains(resp, `"duplicate":"guid-2"`) {
			t.Errorf("replayed body: got %d %s, want 200 duplicate: a delivery is deduplicated by its body", code, resp)
		}
		if n := st.removes.Load(); n != 1 {
			t.Errorf("removals reaching the board store: got %d, want 1: a duplicate is not processed again", n)
		}
		if got := deliveriesOutcome(t, reg, "duplicate"); got != 1 {
			t.Errorf("webhook_deliveries_total{outcome=\"duplicate\"}: got %v, want 1", got)
		}
	})
}

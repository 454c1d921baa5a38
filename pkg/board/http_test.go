package board_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/board"
)

// TestHandler pins GET /board: newest first, every field on the wire, the
// repo, state and limit filters, an escaped HTML table, a card count that
// agrees in number, a JSON link that keeps the filters, "no cards match"
// apart from "not synced yet", numbers sorted as numbers, 400 naming a bad
// parameter, and 404 without a store.
func TestHandler(t *testing.T) {
	store := board.NewMemoryStore()
	updated := time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC)
	for _, c := range []board.Card{
		{Host: "github.com", Repo: "acme/app", Number: 1, Title: "crash <on> start", State: "open", Labels: []string{"bug"},
			Assignees: []string{"ana"}, URL: "https://github.com/acme/app/issues/1", Updated: updated},
		{Host: "github.com", Repo: "acme/app", Number: 2, Title: "fix", State: "closed", PullRequest: true, Updated: updated.Add(time.Minute)},
		{Host: "github.com", Repo: "acme/lib", Number: 1, Title: "lib", State: "open", Updated: updated.Add(-time.Minute)},
	} {
		if _, err := store.Put(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	h := board.Handler(store, nil, nil)
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}

	code, body := get(h, "/board?format=json")
	var view struct {
		Status any              `json:"status"`
		Cards  []map[string]any `json:"cards"`
	}
	err := json.Unmarshal([]byte(body), &view)
	cards := view.Cards
	if code != 200 || err != nil || len(cards) != 3 || view.Status != nil || !strings.Contains(body, `"status":null`) {
		t.Fatalf("GET /board?format=json = %d %s (%v), want 200, 3 cards and status null: a handler without a status source says so", code, body, err)
	}
	first := cards[0]
	if first["repo"] != "acme/app" || first["number"] != 2.0 || first["pull_request"] != true || first["state"] != "closed" ||
		first["updated"] != "2026-09-30T14:01:00Z" || fmt.Sprint(first["labels"]) != "[]" {
		t.Errorf("first card %v, want acme/app#2, the closed pull request updated at 14:01Z with labels []: newest first, every field on the wire", first)
	}
	if code, body := get(h, "/board?format=json&repo=acme/app&state=open"); code != 200 || strings.Count(body, `"number"`) != 1 || !strings.Contains(body, `"assignees":["ana"]`) {
		t.Errorf("GET /board filtered = %d %s, want the one open card of acme/app: repo and state filter", code, body)
	}
	if code, body := get(h, "/board?format=json&limit=1"); code != 200 || strings.Count(body, `"number"`) != 1 {
		t.Errorf("GET /board?limit=1 = %d %s, want one card: limit bounds", code, body)
	}
	code, body = get(h, "/board")
	if code != 200 || !strings.Contains(body, "<table>") || !strings.Contains(body, "crash &lt;on&gt; start") || !strings.Contains(body, `href="https://github.com/acme/app/issues/1"`) {
		t.Errorf("GET /board = %d %s, want an HTML table with the escaped title linked to the issue", code, body)
	}
	_, body = get(h, "/board?repo=acme/app&state=open")
	if !strings.Contains(body, "1 card of acme/app, open") || !strings.Contains(body, `href="?format=json&amp;repo=acme%2Fapp&amp;state=open"`) {
		t.Errorf("GET /board filtered lacks \"1 card\" or a JSON link with its filters:\n%s", body)
	}
	if _, body = get(h, "/board?repo=acme/none"); !strings.Contains(body, "no cards match these filters") {
		t.Errorf("GET /board?repo=acme/none lacks \"no cards match\", want it: a filter that matches nothing is not an unsynced board\n%s", body)
	}
	for _, n := range []int{13, 2} { // same second, #13 later within it: numbers sort as numbers
		if _, err := store.Put(context.Background(), board.Card{Host: "github.com", Repo: "acme/lib", Number: n, Title: "t", State: "open",
			URL: fmt.Sprintf("https://github.com/acme/lib/issues/%d", n), Updated: time.Date(2026, 9, 30, 15, 0, 0, n*int(time.Millisecond), time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, body = get(h, "/board?repo=acme/lib"); strings.Index(body, "issues/2\"") > strings.Index(body, "issues/13\"") {
		t.Errorf("GET /board lists acme/lib#13 before #2, want numbers sorted as numbers within one second, its milliseconds aside:\n%s", body)
	}
	for _, q := range []string{"state=merged", "repo=acme", "limit=0", "limit=5001", "limit=x", "format=xml", "stat=open", "format=json&repos=acme/app"} {
		field, _, _ := strings.Cut(q[strings.LastIndex(q, "&")+1:], "=") // an unknown parameter is refused, not ignored
		if code, body := get(h, "/board?"+q); code != 400 || !strings.Contains(body, field) {
			t.Errorf("GET /board?%s = %d %s, want 400 naming %s: bad input names the field", q, code, body, field)
		}
	}
	if code, _ := get(board.Handler(nil, nil, nil), "/board"); code != 404 {
		t.Errorf("GET /board without a store = %d, want 404: no repositories, no board", code)
	}
}

// TestHandlerSaysWhoSyncsAndHowFresh pins the board page's sync status: the
// lease's owner, or in App mode the owners of the lease group's shards and
// how many are held; whether the serving replica syncs; and the serving
// replica's last complete pass, which another replica's page does not know.
func TestHandlerSaysWhoSyncsAndHowFresh(t *testing.T) {
	last := time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		status board.Status
		want   []string
		why    string
	}{
		{board.Status{Syncer: "replica-b"}, []string{"Synced by <code>replica-b</code>", "not known here"}, "another replica syncs"},
		{board.Status{Syncer: "replica-a", Self: true, LastPass: last}, []string{"(this replica)", "last complete pass", `datetime="2026-09-30T14:00:00.000Z"`}, "this replica syncs"},
		{board.Status{Syncer: "replica-a", Self: true}, []string{"none yet"}, "this replica was elected and has not passed yet"},
		{board.Status{}, []string{"nobody syncs now"}, "nobody holds the lease"},
		{board.Status{SyncerUnknown: true}, []string{"Who syncs is not known"}, "the lease store did not answer"},
		{board.Status{Shards: 4, Syncers: []string{"replica-a", "replica-b"}, Held: 3, Self: true}, []string{"Synced by <code>replica-a</code>, <code>replica-b</code> (this replica among them) · 3 of 4 shards held", "none yet"}, "in App mode, the holders of the group's shards sync, and one shard is unheld"},
		{board.Status{Shards: 1, Syncers: []string{"replica-b"}, Held: 1}, []string{"Synced by <code>replica-b</code> · 1 of 1 shard held", "not known here"}, "in App mode, another replica holds the group's one shard"},
		{board.Status{Shards: 4}, []string{"nobody syncs now"}, "in App mode, no shard of the group is held"},
		{board.Status{Shards: 4, SyncerUnknown: true}, []string{"Who syncs is not known"}, "in App mode, the lease store did not answer"},
	} {
		h := board.Handler(board.NewMemoryStore(), nil, func(context.Context) board.Status { return c.status })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/board", nil))
		for _, w := range c.want {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("GET /board with status %+v lacks %q, want it: %s", c.status, w, c.why)
			}
		}
	}
}

// TestHandlerJSONCarriesTheSyncStatus pins GET /board?format=json's
// status: what the HTML page says of the sync, every field always present,
// syncers [] and last_pass null when there are none.
func TestHandlerJSONCarriesTheSyncStatus(t *testing.T) {
	last := time.Date(2026, 9, 30, 14, 0, 0, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		status board.Status
		want   string
		why    string
	}{
		{board.Status{Syncer: "replica-b"},
			`{"syncer":"replica-b","syncer_unknown":false,"self":false,"shards":0,"syncers":[],"held":0,"last_pass":null}`,
			"another replica syncs; its passes are not known here"},
		{board.Status{Syncer: "replica-a", Self: true, LastPass: last},
			`{"syncer":"replica-a","syncer_unknown":false,"self":true,"shards":0,"syncers":[],"held":0,"last_pass":"2026-09-30T13:00:00Z"}`,
			"this replica syncs; its last complete pass in UTC"},
		{board.Status{SyncerUnknown: true},
			`{"syncer":"","syncer_unknown":true,"self":false,"shards":0,"syncers":[],"held":0,"last_pass":null}`,
			"the lease store did not answer: unknown, not nobody"},
		{board.Status{Shards: 4, Syncers: []string{"replica-a", "replica-b"}, Held: 3, Self: true},
			`{"syncer":"","syncer_unknown":false,"self":true,"shards":4,"syncers":["replica-a","replica-b"],"held":3,"last_pass":null}`,
			"in App mode, the holders of the group's shards and how many are held"},
	} {
		h := board.Handler(board.NewMemoryStore(), nil, func(context.Context) board.Status { return c.status })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/board?format=json", nil))
		var view struct {
			Status json.RawMessage `json:"status"`
			Cards  json.RawMessage `json:"cards"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &view); err != nil || rec.Code != 200 {
			t.Fatalf("GET /board?format=json = %d %s (%v), want 200 and a View", rec.Code, rec.Body, err)
		}
		if got := string(view.Status); got != c.want {
			t.Errorf("status of %+v: got %s, want %s: %s", c.status, got, c.want, c.why)
		}
		if got := string(view.Cards); got != "[]" {
			t.Errorf("cards of an empty board: got %s, want []", got)
		}
	}
}

// failingCards is a board store whose Cards fails with err.
type failingCards struct {
	board.Store
	err error
}

func (f failingCards) Cards(context.Context, board.Query) ([]board.Card, error) { return nil, f.err }

// TestHandlerTellsAMalformedCardFromAStoreThatDidNotAnswer pins GET
// /board's two failures apart: a store that did not answer is 503 "retry",
// while a stored card the store cannot read (board.ErrMalformed) is 500,
// saying a stored card is malformed: no retry mends it, and the replica's
// log names the document to repair or delete. Neither quotes the error.
func TestHandlerTellsAMalformedCardFromAStoreThatDidNotAnswer(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		code     int
		want     string
		notQuote string
	}{
		{"store did not answer", fmt.Errorf("server selection error: 10.0.0.7:27017: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "retry", "10.0.0.7"},
		{"malformed card", fmt.Errorf("%w: _id %q: title: not a string", board.ErrMalformed, "github.com/acme/app#7"), http.StatusInternalServerError, "malformed", "acme/app#7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			board.Handler(failingCards{board.NewMemoryStore(), c.err}, nil, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/board?format=json", nil))
			body := rec.Body.String()
			if rec.Code != c.code || !strings.Contains(body, c.want) || strings.Contains(body, c.notQuote) {
				t.Errorf("GET /board with Cards failing %v: got %d %s, want %d saying %q, without quoting the error", c.err, rec.Code, body, c.code, c.want)
			}
		})
	}
}

// TestHandlerShowsDefaultLimitCardsUnlessAskedForMore pins GET /board's
// default bound: DefaultLimit cards, the most recently updated, unless
// ?limit= asks for more.
func TestHandlerShowsDefaultLimitCardsUnlessAskedForMore(t *testing.T) {
	store := board.NewMemoryStore()
	updated := time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC)
	for n := 1; n <= board.DefaultLimit+1; n++ {
		if _, err := store.Put(context.Background(), board.Card{Host: "github.com", Repo: "acme/app", Number: n, Title: "t", State: "open",
			Updated: updated.Add(time.Duration(n) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	h := board.Handler(store, nil, nil)
	for _, c := range []struct {
		query string
		want  int
		why   string
	}{
		{"", board.DefaultLimit, "without ?limit=, DefaultLimit cards"},
		{fmt.Sprintf("&limit=%d", board.DefaultLimit+1), board.DefaultLimit + 1, "?limit= asks for more"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/board?format=json"+c.query, nil))
		var view board.View
		if err := json.Unmarshal(rec.Body.Bytes(), &view); err != nil || rec.Code != 200 {
			t.Fatalf("GET /board?format=json%s = %d (%v), want 200 and a View", c.query, rec.Code, err)
		}
		if len(view.Cards) != c.want || view.Cards[0].Number != board.DefaultLimit+1 {
			t.Errorf("GET /board?format=json%s: got %d cards, the first #%d, want %d from #%d: %s", c.query, len(view.Cards), view.Cards[0].Number, c.want, board.DefaultLimit+1, c.why)
		}
	}
}

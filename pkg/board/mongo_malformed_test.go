package board_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// cardDoc is acme/app's card number as board_cards keeps it, updated at at
// (any BSON value), under _id id.
func cardDoc(id any, number int, at any) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"},
		{Key: "number", Value: number}, {Key: "title", Value: "t"}, {Key: "state", Value: "open"},
		{Key: "labels", Value: bson.A{}}, {Key: "assignees", Value: bson.A{}},
		{Key: "pull_request", Value: false}, {Key: "url", Value: ""}, {Key: "updated_at", Value: at}}
}

func insertDocs(t *testing.T, db *mongo.Database, docs ...bson.D) {
	t.Helper()
	for _, d := range docs {
		if _, err := db.Collection(board.Collection).InsertOne(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMongoStoreCardsSkipMalformedDocumentsAndFillThePage pins what Cards
// does with documents it cannot read as cards: it skips each, tells
// WithMalformed's function its _id and an ErrMalformed error, once a call,
// and fills the page from the cards after it, so any limit holds as many
// cards as there are, up to the limit. The bad documents sit where a page
// meets them: one tied with a card's instant (after it by _id), one whose
// _id is no string (no place in the board's order), and one whose
// updated_at is a string (after every date). Until then Cards answered
// ErrMalformed for any page that reached one, and GET /board 500.
func TestMongoStoreCardsSkipMalformedDocumentsAndFillThePage(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	s := newMongoStore(t, db)
	var good []board.Card // newest first
	for n := 5; n >= 1; n-- {
		c := board.Card{Host: "github.com", Repo: "acme/app", Number: n, State: "open", Updated: t0.Add(time.Duration(n) * time.Second)}
		if _, err := s.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
		good = append(good, c)
	}
	oid := bson.NewObjectID()
	insertDocs(t, db,
		mongotest.WithField(cardDoc("github.com/acme/app#40", 40, t0.Add(4*time.Second)), "labels", "bug"),
		cardDoc(oid, 21, t0.Add(2500*time.Millisecond)),
		cardDoc("github.com/acme/app#22", 22, "yesterday"),
	)
	oidText := bson.RawValue{Type: bson.TypeObjectID, Value: oid[:]}.String()
	for _, c := range []struct {
		limit int
		skips []string // the bad documents the page reaches, in its order
	}{
		{1, nil},
		{2, nil},
		{3, []string{"github.com/acme/app#40"}},
		{4, []string{"github.com/acme/app#40", oidText}},
		{5, []string{"github.com/acme/app#40", oidText}},
		// The read after a skip starts after the last document read,
		// among the dates: #22 sorts after every card, so no page needs it.
		{6, []string{"github.com/acme/app#40", oidText}},
	} {
		told, tctx := malformedTold(t)
		cards, err := s.Cards(tctx, board.Query{Limit: c.limit})
		want := good[:min(c.limit, len(good))]
		if err != nil || !slices.EqualFunc(cards, want, func(a, b board.Card) bool { return a.ID() == b.ID() }) {
			t.Errorf("Cards limit %d = %v, %v, want %v: a malformed document is skipped and the page filled from the cards after it", c.limit, ids(cards), err, ids(want))
		}
		if !slices.Equal(*told, c.skips) {
			t.Errorf("Cards limit %d told of %q, want %q: each document skipped, once", c.limit, *told, c.skips)
		}
	}
	// A page that reads it in one go tells of it.
	told, tctx := malformedTold(t)
	if cards, err := s.Cards(tctx, board.Query{Limit: 100}); err != nil || len(cards) != len(good) ||
		!slices.Equal(*told, []string{"github.com/acme/app#40", oidText, "github.com/acme/app#22"}) {
		t.Errorf("Cards limit 100 = %v, %v, told %q, want the 5 cards, told of the 3 documents", ids(cards), err, *told)
	}
	// GET /board shows the cards beside them.
	rec := httptest.NewRecorder()
	board.Handler(s, nil, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/board?format=json", nil))
	var view struct {
		Cards []struct {
			Number int `json:"number"`
		} `json:"cards"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &view); rec.Code != 200 || err != nil || len(view.Cards) != len(good) {
		t.Errorf("GET /board = %d %s, want 200 and the 5 cards: one malformed document does not take the board down for every reader", rec.Code, rec.Body)
	}
}

func ids(cards []board.Card) []string {
	out := make([]string, len(cards))
	for i, c := range cards {
		out[i] = c.ID()
	}
	return out
}

// TestMongoStoreWritesGoOnBesideAMalformedDocument pins that the writes
// that do not read a card (Remove, Prune, ExpireTombstones) neither fail
// on a malformed document nor read it as a card: Remove turns it into the
// tombstone, Prune deletes it with its repository's cards, and an expiry
// leaves it.
func TestMongoStoreWritesGoOnBesideAMalformedDocument(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	s := newMongoStore(t, db)
	insertDocs(t, db,
		mongotest.WithField(cardDoc("github.com/acme/app#1", 1, t0), "title", 7),
		mongotest.WithField(cardDoc("github.com/acme/app#2", 2, t0), "updated_at", "yesterday"),
		mongotest.WithField(cardDoc("github.com/acme/old#3", 3, t0), "repo", "acme/old"),
	)
	if _, err := db.Collection(board.Collection).UpdateOne(ctx, bson.D{{Key: "_id", Value: "github.com/acme/old#3"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "labels", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.Remove(ctx, "github.com", "acme/app", 1, t0.Add(time.Hour)); err != nil || !removed {
		t.Errorf("Remove of a malformed card = %v, %v, want true: it becomes the tombstone", removed, err)
	}
	if n, err := s.ExpireTombstones(ctx, t0.Add(2*time.Hour)); err != nil || n != 0 {
		t.Errorf("ExpireTombstones = %d, %v, want 0, nil: the malformed document is no expired tombstone", n, err)
	}
	if n, err := s.Prune(ctx, "github.com", []string{"acme/app"}); err != nil || n != 1 {
		t.Errorf("Prune = %d, %v, want 1: the malformed card of acme/old goes with its repository", n, err)
	}
	told, tctx := malformedTold(t)
	if cards, err := s.Cards(tctx, board.Query{Limit: 10}); err != nil || len(cards) != 0 || !slices.Equal(*told, []string{"github.com/acme/app#2"}) {
		t.Errorf("Cards = %v, %v, told %q, want none, told of #2 alone: #1 is a tombstone now, acme/old pruned", cards, err, *told)
	}
}

// TestSyncOnMongoGoesOnPastAMalformedCard runs a full sync of a repository
// whose board_cards hold documents the store cannot read: one under an
// issue the forge lists (its updated_at a string, so Put must read it to
// decide), which the sync replaces with the issue's card; one of an issue
// the forge no longer lists and one whose _id is not its card's, which the
// full sync's read of the repository's cards skips. The repository is
// synced, every issue has its card, and the pass logs each document once,
// at Warn with its _id and the field, and counts the three in
// Pass.Malformed. Until then the pass failed the repository, every pass,
// at the first one it met.
func TestSyncOnMongoGoesOnPastAMalformedCard(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	store := newMongoStore(t, db)
	sim, simSrv := forgetest.StartSim(t)
	for n := 1; n <= 3; n++ {
		if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "i", State: "open"}); err != nil {
			t.Fatal(err)
		}
	}
	insertDocs(t, db,
		mongotest.WithField(cardDoc("github.com/acme/app#2", 2, t0), "updated_at", "yesterday"),
		mongotest.WithField(cardDoc("github.com/acme/app#9", 9, t0), "title", 9),
		cardDoc("github.com/acme/app#7", 8, t0),
	)
	logger, logs := forgetest.TextLogger()
	fc := forgetest.NewForge(t, simSrv.URL+"/", nil, "tok", nil, nil)
	passes := make(chan board.Pass, 10)
	sync, err := board.NewSync(board.Config{Store: store, Forge: fc, Host: "github.com", Logger: logger,
		Repos: []string{"acme/app"}, Interval: 50 * time.Millisecond, OnPass: func(p board.Pass) { passes <- p }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sync.Work(ctx) }()
	var p board.Pass
	select {
	case p = <-passes:
	case <-time.After(30 * time.Second):
		t.Fatalf("no pass in 30s")
	}
	cancel()
	<-done

	if rp := p.Repos[0]; rp.Err != nil || rp.Listed != 3 || rp.Changed != 3 {
		t.Errorf("first pass = %+v, want acme/app synced, 3 listed, 3 changed: a malformed card document fails no repository", rp)
	}
	if p.Malformed != 3 {
		t.Errorf("Pass.Malformed = %d, want 3: each document the pass met, once", p.Malformed)
	}
	cards, err := store.Cards(context.Background(), board.Query{Limit: 10})
	if got := ids(cards); err != nil || !slices.Equal(slices.Sorted(slices.Values(got)), []string{"github.com/acme/app#1", "github.com/acme/app#2", "github.com/acme/app#3"}) {
		t.Errorf("cards = %v, %v, want #1, #2 and #3: the issue's card replaced its malformed document", got, err)
	}
	out := logs.String()
	for _, c := range []struct{ id, field string }{{"github.com/acme/app#2", "updated_at"}, {"github.com/acme/app#9", "title"}, {"github.com/acme/app#7", "not its card's id"}} {
		var lines []string
		for l := range strings.Lines(out) {
			if strings.Contains(l, "board sync met a card document it cannot read") && strings.Contains(l, "card="+c.id+" ") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], c.field) {
			t.Errorf("log lines of %s = %q, want one Warn naming %q: each document met is told once a pass, naming the field", c.id, lines, c.field)
		}
	}
}

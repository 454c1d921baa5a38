package board_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/board/boardtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	boardtest.Run(t, func(*testing.T) board.Store { return board.NewMemoryStore() })
}

func TestMongoStoreConformance(t *testing.T) {
	boardtest.Run(t, func(t *testing.T) board.Store { return newMongoStore(t, mongotest.DB(t)) })
}

func newMongoStore(t *testing.T, db *mongo.Database) *board.MongoStore {
	t.Helper()
	s, err := board.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	return s
}

// TestMongoStoreCreatesIndexes pins that the store's queries have their
// indexes: the whole board and one repository's, both newest first.
func TestMongoStoreCreatesIndexes(t *testing.T) {
	db := mongotest.DB(t)
	newMongoStore(t, db)
	specs, err := db.Collection(board.Collection).Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatalf("ListSpecifications: %v", err)
	}
	have := map[string]bool{}
	for _, s := range specs {
		have[s.Name] = true
	}
	for _, name := range []string{"by_updated", "repo_by_updated"} {
		if !have[name] {
			t.Errorf("index %q missing (have %v): every query of the store has an index", name, have)
		}
	}
}

// TestMongoStoreMalformedDocuments pins what the store does with a
// document of the wrong shape: never a panic or a card; Cards skips it and
// tells WithMalformed's function (its _id, an ErrMalformed error), and a
// Put of its card replaces it, even with a card older than the document
// claims to be, and tells of it too. (Both answered ErrMalformed until
// then, so one bad document failed GET /board for every reader and the
// sync of its repository on every pass.)
func TestMongoStoreMalformedDocuments(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	const id = "github.com/acme/app#1"
	good := bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"},
		{Key: "number", Value: 1}, {Key: "title", Value: "t"}, {Key: "state", Value: "open"},
		{Key: "labels", Value: bson.A{"bug"}}, {Key: "assignees", Value: bson.A{}},
		{Key: "pull_request", Value: false}, {Key: "url", Value: ""}, {Key: "updated_at", Value: now.Add(time.Hour)}}
	with := func(key string, v any) bson.D { return mongotest.WithField(good, key, v) }
	for _, c := range []struct {
		name string
		doc  bson.D
	}{
		{"number is a string", with("number", "one")},
		{"state unknown", with("state", "merged")},
		{"repo missing", with("repo", nil)},
		{"labels is a string", with("labels", "bug")},
		{"updated_at is a string", with("updated_at", "yesterday")},
		{"updated_at missing", with("updated_at", nil)},
		// The driver would convert these to a card's types, but the store's
		// queries compare by BSON type: an updated_at of another type sorts
		// apart from the dates and never passes Put's filter.
		{"updated_at is a date string", with("updated_at", now.Add(time.Hour).Format(time.RFC3339))},
		{"updated_at is a number", with("updated_at", now.Add(time.Hour).UnixMilli())},
		{"number is a boolean", with("number", true)},
		{"pull_request is a number", with("pull_request", 1)},
		{"title is null", with("title", bson.Null{})},
		{"_id is not the card's", with("number", 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s := newMongoStore(t, db)
			if _, err := db.Collection(board.Collection).InsertOne(context.Background(), c.doc); err != nil {
				t.Fatal(err)
			}
			told, ctx := malformedTold(t)
			if cards, err := s.Cards(ctx, board.Query{Limit: 10}); err != nil || len(cards) != 0 {
				t.Errorf("Cards = %v, %v, want none and no error: a malformed document is skipped, never a card nor a failed board", cards, err)
			}
			if want := []string{id}; !slices.Equal(*told, want) {
				t.Errorf("Cards told of %q, want %q: each skipped document, once", *told, want)
			}
			*told = nil
			// The card is older than the stored document claims to be, so
			// the store must read that document to decide.
			card := board.Card{Host: "github.com", Repo: "acme/app", Number: 1, State: "open", Updated: now}
			assertPutRepairs(t, ctx, s, told, card)
		})
	}
}

// malformedTold is a context whose WithMalformed function notes each _id
// told, failing t for an error that is not ErrMalformed.
func malformedTold(t *testing.T) (*[]string, context.Context) {
	t.Helper()
	var told []string
	return &told, board.WithMalformed(context.Background(), func(id string, err error) {
		told = append(told, id)
		if !errors.Is(err, board.ErrMalformed) {
			t.Errorf("told of %s for %v, want ErrMalformed", id, err)
		}
	})
}

// assertPutRepairs pins that a Put of card over the malformed document
// under its ID replaces it, tells of it, and that Cards then lists card.
func assertPutRepairs(t *testing.T, ctx context.Context, s board.Store, told *[]string, card board.Card) {
	t.Helper()
	if changed, err := s.Put(ctx, card); err != nil || !changed {
		t.Errorf("Put over it = %v, %v, want true, nil: the forge's read replaces a document the store cannot read, which no bar can be read from and no reader can show", changed, err)
	}
	if want := []string{card.ID()}; !slices.Equal(*told, want) {
		t.Errorf("Put told of %q, want %q: a replaced document is told of", *told, want)
	}
	if cards, err := s.Cards(ctx, board.Query{Limit: 10}); err != nil || len(cards) != 1 || cards[0].ID() != card.ID() || !cards[0].Updated.Equal(card.Updated) {
		t.Errorf("Cards after the Put = %v, %v, want the card put: the board is repaired", cards, err)
	}
}

// legacyCardDoc is card c as a release before lower-cased ids stored it:
// _id the host, the repository as configured and the number.
func legacyCardDoc(c board.Card) bson.D {
	return bson.D{{Key: "_id", Value: fmt.Sprintf("%s/%s#%d", c.Host, c.Repo, c.Number)}, {Key: "host", Value: c.Host},
		{Key: "repo", Value: c.Repo}, {Key: "number", Value: c.Number}, {Key: "title", Value: c.Title},
		{Key: "state", Value: c.State}, {Key: "labels", Value: bson.A{}}, {Key: "assignees", Value: bson.A{}},
		{Key: "pull_request", Value: false}, {Key: "url", Value: ""}, {Key: "updated_at", Value: c.Updated}}
}

// storedIDs is every _id of board_cards, sorted.
func storedIDs(t *testing.T, db *mongo.Database) []string {
	t.Helper()
	cur, err := db.Collection(board.Collection).Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, d.ID)
	}
	slices.Sort(out)
	return out
}

// TestMongoStoreMovesLegacyIDs pins the migration of cards stored under an
// id with the repository as configured (capitals and all) by an earlier
// release: opening the store moves each to its lower-cased id, the newer
// read winning where both exist, and replicas opening the store at once
// end with the same single card per issue.
func TestMongoStoreMovesLegacyIDs(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	coll := db.Collection(board.Collection)
	card := func(repo string, n int, title string, u time.Time) board.Card {
		return board.Card{Host: "github.com", Repo: repo, Number: n, Title: title, State: "open", Updated: u}
	}
	newer := card("acme/app", 1, "newer, under the new id", now.Add(time.Hour))
	s := newMongoStore(t, db)
	if _, err := s.Put(ctx, newer); err != nil {
		t.Fatal(err)
	}
	for _, c := range []board.Card{
		card("Acme/App", 1, "older, under the legacy id", now),
		card("Acme/App", 2, "only under the legacy id", now),
		card("ACME/app", 2, "older spelling, older read", now.Add(-time.Hour)),
	} {
		if _, err := coll.InsertOne(ctx, legacyCardDoc(c)); err != nil {
			t.Fatal(err)
		}
	}
	if cards, err := s.Cards(ctx, board.Query{Limit: 10}); err != nil || len(cards) != 2 {
		t.Errorf("Cards before the migration: got %d cards, %v, want 2, nil: a card under its legacy id is read, each issue once", len(cards), err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := board.NewMongoStore(ctx, db)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("NewMongoStore racing three others: %v, want nil: replicas starting together each migrate", err)
		}
	}
	if got, want := storedIDs(t, db), []string{"github.com/acme/app#1", "github.com/acme/app#2"}; !slices.Equal(got, want) {
		t.Fatalf("stored ids: got %v, want %v: every legacy id is moved to its lower-cased id, one card per issue", got, want)
	}
	cards, err := s.Cards(ctx, board.Query{Limit: 10})
	if err != nil || len(cards) != 2 {
		t.Fatalf("Cards: got %d, %v, want 2", len(cards), err)
	}
	byNumber := map[int]board.Card{}
	for _, c := range cards {
		byNumber[c.Number] = c
	}
	if c := byNumber[1]; c.Title != newer.Title || c.Repo != "acme/app" {
		t.Errorf("card 1: got %q as %s, want %q as acme/app: the newer read wins the move", c.Title, c.Repo, newer.Title)
	}
	if c := byNumber[2]; c.Title != "only under the legacy id" || c.Repo != "Acme/App" || !c.Updated.Equal(now) {
		t.Errorf("card 2: got %+v, want the newer legacy card, as Acme/App: a moved card keeps its fields", c)
	}
	if _, err := board.NewMongoStore(ctx, db); err != nil {
		t.Fatalf("NewMongoStore again: %v", err)
	}
	if got := storedIDs(t, db); len(got) != 2 {
		t.Errorf("stored ids after another start: got %v, want the same two: the migration is idempotent", got)
	}
}

// TestMongoStoreRemoveTakesTheLegacyTwin pins that Remove deletes a card
// stored under its legacy id too, as a replica of an earlier release still
// running may write it beside the card's id: the removed issue leaves no
// card behind, only its tombstone under the card's id.
func TestMongoStoreRemoveTakesTheLegacyTwin(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	s := newMongoStore(t, db)
	c := board.Card{Host: "github.com", Repo: "Acme/App", Number: 3, Title: "t", State: "open", Updated: now}
	if _, err := s.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection(board.Collection).InsertOne(ctx, legacyCardDoc(c)); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.Remove(ctx, "github.com", "Acme/App", 3, now.Add(time.Hour)); err != nil || !removed {
		t.Fatalf("Remove = %v, %v, want true", removed, err)
	}
	if got := storedIDs(t, db); !slices.Equal(got, []string{"github.com/acme/app#3"}) {
		t.Errorf("stored ids after Remove: got %v, want the tombstone's alone: the legacy twin goes with the card", got)
	}
	if cards, err := s.Cards(ctx, board.Query{Limit: 10}); err != nil || len(cards) != 0 {
		t.Errorf("Cards after Remove = %v, %v, want none: a tombstone is no card", cards, err)
	}
}

// TestMongoStoreMalformedTombstones pins that a tombstone document (one
// with gone_at) of the wrong shape is replaced by a Put of its card, told
// of, never a silent refusal nor an error that fails the sync of its
// repository on every pass; and that a gone_at of another type than a
// date makes no tombstone: Cards reads the document, skips it and tells of
// it. No bar can be read from such a tombstone: should the card put be of
// a removed issue, the next full sync removes it again.
func TestMongoStoreMalformedTombstones(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	const id = "github.com/acme/app#1"
	good := bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"},
		{Key: "number", Value: 1}, {Key: "updated_at", Value: now.Add(time.Hour)}, {Key: "gone_at", Value: now.Add(time.Hour)}}
	with := func(key string, v any) bson.D { return mongotest.WithField(good, key, v) }
	for _, c := range []struct {
		name   string
		doc    bson.D
		inList bool // Cards reads it: its gone_at is no date
	}{
		{"gone_at is a string", with("gone_at", "yesterday"), true},
		{"gone_at is a number", with("gone_at", now.UnixMilli()), true},
		{"updated_at missing", with("updated_at", nil), false},
		{"updated_at is a string", with("updated_at", "yesterday"), false},
		{"number is a string", with("number", "one"), false},
		{"repo missing", with("repo", nil), false},
		{"_id is not the card's", with("number", 2), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s := newMongoStore(t, db)
			if _, err := db.Collection(board.Collection).InsertOne(context.Background(), c.doc); err != nil {
				t.Fatal(err)
			}
			told, ctx := malformedTold(t)
			cards, err := s.Cards(ctx, board.Query{Limit: 10})
			if err != nil || len(cards) != 0 {
				t.Errorf("Cards = %v, %v, want none: a tombstone is never listed, a malformed document is skipped", cards, err)
			}
			if c.inList && !slices.Equal(*told, []string{id}) {
				t.Errorf("Cards told of %q, want %q: a gone_at that is no date makes no tombstone, and the document is no card", *told, id)
			}
			if !c.inList && len(*told) != 0 {
				t.Errorf("Cards told of %q, want none: a tombstone is not listed, so not read", *told)
			}
			*told = nil
			// Older than the tombstone claims to be, so the store must read
			// it to decide.
			card := board.Card{Host: "github.com", Repo: "acme/app", Number: 1, State: "open", Updated: now}
			assertPutRepairs(t, ctx, s, told, card)
		})
	}
	// The good tombstone refuses the older read, and takes a newer one.
	db := mongotest.DB(t)
	s := newMongoStore(t, db)
	if _, err := db.Collection(board.Collection).InsertOne(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	card := board.Card{Host: "github.com", Repo: "acme/app", Number: 1, State: "open", Updated: now}
	if changed, err := s.Put(context.Background(), card); err != nil || changed {
		t.Errorf("Put of an older read over a good tombstone = %v, %v, want false, nil", changed, err)
	}
	card.Updated = now.Add(2 * time.Hour)
	if changed, err := s.Put(context.Background(), card); err != nil || !changed {
		t.Errorf("Put of a newer read over a good tombstone = %v, %v, want true, nil", changed, err)
	}
	if cards, err := s.Cards(context.Background(), board.Query{Limit: 10}); err != nil || len(cards) != 1 {
		t.Errorf("Cards = %v, %v, want the one card put over the tombstone", cards, err)
	}
}

// regexPatterns returns every $regex pattern in doc, however deep.
func regexPatterns(doc bson.Raw) []string {
	var out []string
	elems, _ := doc.Elements()
	for _, e := range elems {
		v := e.Value()
		switch {
		case e.Key() == "$regex" && v.Type == bson.TypeString:
			out = append(out, v.StringValue())
		case v.Type == bson.TypeEmbeddedDocument:
			out = append(out, regexPatterns(v.Document())...)
		case v.Type == bson.TypeArray:
			out = append(out, regexPatterns(bson.Raw(v.Array()))...)
		}
	}
	return out
}

// TestMongoStorePrunesAnyNumberOfBoardRepositories pins Prune with a
// --board-repos too long for one regular expression: 400 repositories
// whose one case-insensitive alternation would pass MongoDB's $regex
// pattern limit (32,764 characters; the embedded server does not enforce
// it, so the test reads each pattern the delete sends, by the driver's
// command monitor). Every pattern stays under the limit, and the cards
// left are exactly the listed repositories', in any case, and another
// host's.
func TestMongoStorePrunesAnyNumberOfBoardRepositories(t *testing.T) {
	const mongoRegexLimit = 32764
	ctx := context.Background()
	var mu sync.Mutex
	var deletes []bson.Raw
	c, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI(t)).SetMonitor(&event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "delete" {
				mu.Lock()
				deletes = append(deletes, bytes.Clone(e.Command))
				mu.Unlock()
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	db := c.Database("board_" + strings.ToLower(rand.Text()[:12]))
	t.Cleanup(func() { _ = db.Drop(ctx); _ = c.Disconnect(ctx) })
	s := newMongoStore(t, db)

	var repos []string
	for i := range 400 {
		repos = append(repos, fmt.Sprintf("owner-%03d/%s-%03d", i, strings.Repeat("a-long.repository-name", 4), i))
	}
	if joined := len(strings.Join(repos, "|")); joined <= mongoRegexLimit {
		t.Fatalf("the repositories join in %d characters, want past %d: the test needs a list one expression cannot hold", joined, mongoRegexLimit)
	}
	card := func(host, repo string) board.Card {
		return board.Card{Host: host, Repo: repo, Number: 1, Title: "t", State: "open", Updated: time.Now()}
	}
	cards := []board.Card{card("github.com", repos[0]), card("github.com", strings.ToUpper(repos[150])), card("github.com", repos[399]),
		card("github.com", "acme/dropped"), card("github.com", repos[7]+"x"), card("ghe.example", "acme/dropped")}
	for _, cd := range cards {
		if _, err := s.Put(ctx, cd); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := s.Prune(ctx, "github.com", repos)
	if err != nil || removed != 2 {
		t.Fatalf("Prune = %d, %v, want 2, nil: the cards of acme/dropped and of a repository one character off a listed one", removed, err)
	}
	left, err := s.Cards(ctx, board.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cd := range left {
		got = append(got, cd.Host+"/"+strings.ToLower(cd.Repo))
	}
	slices.Sort(got)
	want := []string{"ghe.example/acme/dropped", "github.com/" + repos[0], "github.com/" + repos[150], "github.com/" + repos[399]}
	if !slices.Equal(got, want) {
		t.Errorf("cards after Prune: got %v, want %v: every listed repository's cards, in any case, and another host's", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, d := range deletes {
		for _, p := range regexPatterns(d) {
			n++
			if len(p) > mongoRegexLimit {
				t.Errorf("a $regex pattern of %d characters sent, want at most %d: MongoDB refuses a longer one, so the prune would fail", len(p), mongoRegexLimit)
			}
		}
	}
	if n == 0 {
		t.Errorf("no $regex pattern in the %d delete commands sent: want Prune's", len(deletes))
	}
}

// TestMongoStoreAMalformedPruneClaimIsTakenOver pins ClaimPrune over a
// board_prunes document it cannot honour: one whose pruned_at is no date,
// or a date further ahead of the claim than a period (a replica's clock
// that far ahead, or a hand-written value). Either would otherwise refuse
// every claim on the host for as long as it stands, no replica pruning
// and nothing saying why. The claim takes it over, and the claim it
// writes then holds for its period as any other.
func TestMongoStoreAMalformedPruneClaimIsTakenOver(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	const host, list, every = "github.com", "fingerprint", time.Hour
	for _, c := range []struct {
		name   string
		pruned any
	}{
		{"pruned_at is a string", "yesterday"},
		{"pruned_at is a number", now.UnixMilli()},
		{"pruned_at is missing", nil},
		{"pruned_at is more than a period ahead", now.Add(every + time.Minute)},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s := newMongoStore(t, db)
			doc := bson.D{{Key: "_id", Value: host}, {Key: "board", Value: list}}
			if c.pruned != nil {
				doc = append(doc, bson.E{Key: "pruned_at", Value: c.pruned})
			}
			if _, err := db.Collection(board.ClaimsCollection).InsertOne(context.Background(), doc); err != nil {
				t.Fatal(err)
			}
			if won, err := s.ClaimPrune(context.Background(), host, list, now, every); err != nil || !won {
				t.Fatalf("ClaimPrune over it = %v, %v, want true, nil: a claim no period bounds is no claim", won, err)
			}
			if won, err := s.ClaimPrune(context.Background(), host, list, now.Add(every/2), every); err != nil || won {
				t.Errorf("a second claim within the period = %v, %v, want false, nil: the claim written over it stands", won, err)
			}
		})
	}
	// A claim less than a period ahead (clocks a little apart) stands.
	db := mongotest.DB(t)
	s := newMongoStore(t, db)
	if won, err := s.ClaimPrune(context.Background(), host, list, now.Add(time.Minute), every); err != nil || !won {
		t.Fatalf("first claim = %v, %v, want true, nil", won, err)
	}
	if won, err := s.ClaimPrune(context.Background(), host, list, now, every); err != nil || won {
		t.Errorf("a claim from a clock a minute behind = %v, %v, want false, nil", won, err)
	}
}

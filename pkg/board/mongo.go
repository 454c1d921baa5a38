package board

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
)

// Collection is the collection MongoStore keeps cards in.
const Collection = "board_cards"

// ClaimsCollection is the collection MongoStore keeps ClaimPrune's claims
// in, one document per host: _id the host, board and pruned_at the last
// claim's. Apart from board_cards, whose every document a release before
// it reads as a card or a tombstone.
const ClaimsCollection = "board_prunes"

// MongoStore is the MongoDB Store twin: collection board_cards,
// one document per card, _id its Card.ID (the repository lower-cased),
// repo the name as last put (shown). A removed card's document becomes its
// tombstone (Store.Remove): its key, gone_at, and updated_at the bar a Put
// must reach, so Put's one conditional upsert refuses an older read of a
// removed card as it refuses one of a stored card.
//
// A document it cannot read as a card or a tombstone ([ErrMalformed]: a
// field of the wrong type, an _id not its card's, a tombstone where a card
// is expected, as a replica of another release or a hand edit may write)
// is skipped by Cards and replaced by a Put of its card, each told to
// ctx's [WithMalformed] function, so that one bad document neither fails
// GET /board for every reader nor the sync of its repository on every
// pass. It is safe for concurrent use.
type MongoStore struct {
	coll   *mongo.Collection
	claims *mongo.Collection
}

var _ Store = (*MongoStore)(nil)

// cardDoc is a card as board_cards keeps it.
type cardDoc struct {
	ID          string    `bson:"_id"`
	Host        string    `bson:"host"`
	Repo        string    `bson:"repo"`
	Number      int       `bson:"number"`
	Title       string    `bson:"title"`
	State       string    `bson:"state"`
	Labels      []string  `bson:"labels"`
	Assignees   []string  `bson:"assignees"`
	PullRequest bool      `bson:"pull_request"`
	URL         string    `bson:"url"`
	Updated     time.Time `bson:"updated_at"`
	// Gone is set, a date, on a tombstone only, which has no other field
	// than the key's and updated_at.
	Gone time.Time `bson:"gone_at"`
}

// notTombstone matches the card documents: those whose gone_at is not a
// date. A gone_at of another type is not a tombstone's, so such a document
// is read, and reported malformed, rather than passed over.
var notTombstone = bson.E{Key: "gone_at", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "date"}}}}}

// NewMongoStore returns a MongoStore on db's board_cards
// collection, after creating the indexes its queries use (an existing index
// is kept) and moving every card stored under a legacy id (by a release
// before CardID lower-cased the repository) to its id, so one issue has one
// card whatever the case of the configured name.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	coll := db.Collection(Collection)
	err := mongostore.CreateIndexes(ctx, coll, []mongo.IndexModel{
		{Keys: bson.D{{Key: "updated_at", Value: -1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("by_updated")},
		{Keys: bson.D{{Key: "host", Value: 1}, {Key: "repo", Value: 1}, {Key: "updated_at", Value: -1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("repo_by_updated")},
		// The drop of expired tombstones, Remove's and ExpireTombstones'.
		// Sparse: the cards, which have no gone_at, are not in it
		// (https://www.mongodb.com/docs/manual/core/index-sparse/). Not a
		// TTL index (https://www.mongodb.com/docs/manual/core/index-ttl/):
		// the server's TTL monitor deletes on its own clock, which neither
		// the memory twin nor a virtual-time test can follow; an index of
		// the same key with other options fails the creation of this one
		// by a replica of the previous release in a rolling update; and the
		// test server, FerretDB, does not expire documents.
		{Keys: bson.D{{Key: "gone_at", Value: 1}}, Options: options.Index().SetName("tombstones_by_gone").SetSparse(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("board: create %s indexes: %w", Collection, err)
	}
	s := &MongoStore{coll: coll, claims: db.Collection(ClaimsCollection)}
	if err := s.migrateLegacyIDs(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// legacyIDs matches the _id of a card stored under its legacy id, one with
// a capital in its repository (the part between the host, which holds no
// slash, and the number): CardID never writes one. A case-sensitive
// regular expression is matched against the values of the _id index, not
// the documents ($regex, Index Use:
// https://www.mongodb.com/docs/manual/reference/operator/query/regex/), so
// the start after a migration is cheap.
var legacyIDs = bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^[^/]*/[^#]*[A-Z]"}}}}

// migrateLegacyIDs moves every card stored under a legacy id to its id:
// a Put of the card (so the newer of the two reads wins, as between any
// two puts), then a delete of the legacy document only while it is not
// newer than the card put. Replicas starting together each do the same
// idempotent steps; a crash between the two leaves both documents, which
// Cards shows as one, and the next start finishes. A malformed legacy
// document is left for Cards to report.
func (s *MongoStore) migrateLegacyIDs(ctx context.Context) error {
	type legacy struct {
		card Card
		ok   bool
	}
	docs, err := mongostore.FindAll(ctx, s.coll, legacyIDs, nil, func(raw bson.Raw) (legacy, error) {
		c, err := decodeCard(raw)
		return legacy{c, err == nil}, nil
	})
	if err != nil {
		return fmt.Errorf("board: find %s documents under a legacy id: %w", Collection, err)
	}
	for _, d := range docs {
		if !d.ok {
			continue
		}
		if _, err := s.Put(ctx, d.card); err != nil {
			return fmt.Errorf("board: move card %q to its id: %w", d.card.ID(), err)
		}
		old := legacyCardID(d.card.Host, d.card.Repo, d.card.Number)
		filter := bson.D{{Key: "_id", Value: old}, {Key: "updated_at", Value: bson.D{{Key: "$lte", Value: d.card.Updated}}}}
		if _, err := s.coll.DeleteOne(ctx, filter); err != nil {
			return fmt.Errorf("board: delete card %q moved to %q: %w", old, d.card.ID(), err)
		}
	}
	return nil
}

// Put implements Store in one conditional upsert: it matches the
// card's document (or tombstone) only when that is not newer (its updated_at
// is a tombstone's bar), so a newer document makes
// the upsert's insert collide on _id, which is the refusal. Only then, or
// when two first puts race, does it read the document back.
func (s *MongoStore) Put(ctx context.Context, c Card) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	c = c.stamped()
	id := c.ID()
	filter := bson.D{{Key: "_id", Value: id}, {Key: "updated_at", Value: bson.D{{Key: "$lte", Value: c.Updated}}}}
	update := bson.D{{Key: "$set", Value: cardFields(c)}, {Key: "$unset", Value: bson.D{{Key: "gone_at", Value: ""}}}}
	opts := options.UpdateOne().SetUpsert(true)
	// Two attempts: a duplicate key is either a newer card (refused) or a
	// first put that raced ours and stored an older one (try again).
	for range 2 {
		res, err := s.coll.UpdateOne(ctx, filter, update, opts)
		if err == nil {
			return res.UpsertedCount == 1 || res.ModifiedCount == 1, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return false, fmt.Errorf("board: put card %q: %w", id, err)
		}
		raw, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
		if err != nil {
			return false, fmt.Errorf("board: put card %q: read back: %w", id, err)
		}
		bar, err := storedBar(raw)
		if errors.Is(err, ErrMalformed) {
			return s.replaceMalformed(ctx, c, raw, err)
		}
		if err != nil {
			return false, err
		}
		if bar.After(c.Updated) {
			return false, nil
		}
	}
	return false, fmt.Errorf("board: put card %q: raced twice with other writers", id)
}

// cardFields are c's fields as its board_cards document keeps them, but
// for its _id.
func cardFields(c Card) bson.D {
	return bson.D{
		{Key: "host", Value: c.Host}, {Key: "repo", Value: c.Repo}, {Key: "number", Value: c.Number},
		{Key: "title", Value: c.Title}, {Key: "state", Value: c.State},
		{Key: "labels", Value: nonNil(c.Labels)}, {Key: "assignees", Value: nonNil(c.Assignees)},
		{Key: "pull_request", Value: c.PullRequest}, {Key: "url", Value: c.URL},
		{Key: "updated_at", Value: c.Updated},
	}
}

// replaceMalformed replaces raw, the document under c's ID that Put could
// not read (why), with c's, and tells ctx's WithMalformed function. The
// document holds no card the board can show, nor a bar Put can compare
// with, while c is the forge's read of the issue: replacing it repairs
// the card, where refusing c would fail the sync of c's repository on
// every pass, and leaving it would keep the issue off the board, until
// someone deleted it by hand. The replace matches raw's updated_at as
// read (or its absence), so a writer that stored a card there since wins,
// and c's Put is refused as by a newer card. (A replica of another release
// reading this shape as malformed in turn puts its own read back: each
// holds the forge's issue.)
func (s *MongoStore) replaceMalformed(ctx context.Context, c Card, raw bson.Raw, why error) (bool, error) {
	id := c.ID()
	filter := bson.D{{Key: "_id", Value: id}}
	if v, err := raw.LookupErr("updated_at"); err == nil {
		filter = append(filter, bson.E{Key: "updated_at", Value: v})
	} else {
		filter = append(filter, bson.E{Key: "updated_at", Value: bson.D{{Key: "$exists", Value: false}}})
	}
	res, err := s.coll.ReplaceOne(ctx, filter, append(bson.D{{Key: "_id", Value: id}}, cardFields(c)...))
	if err != nil {
		return false, fmt.Errorf("board: put card %q over a malformed document: %w", id, err)
	}
	if res.MatchedCount == 0 {
		return false, nil
	}
	reportMalformed(ctx, id, why)
	return true, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Cards implements Store. A card stored under its legacy id beside its id
// (written by a replica of an earlier release still running, or by a
// migration cut short) is listed once, the newer of the two, so a page may
// hold fewer than q.Limit cards until the next start migrates it. A
// document it cannot read as a card (ErrMalformed) is skipped, told to
// ctx's WithMalformed function, and the page filled from the cards after
// it (see page).
func (s *MongoStore) Cards(ctx context.Context, q Query) ([]Card, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	filter := bson.D{notTombstone}
	for _, f := range []struct{ key, value string }{{"host", q.Host}, {"state", q.State}} {
		if f.value != "" {
			filter = append(filter, bson.E{Key: f.key, Value: f.value})
		}
	}
	if q.Repo != "" {
		// Names compare without regard to case, as on GitHub
		// (forge.RepoKey); the quoted name matches only itself, whole.
		filter = append(filter, bson.E{Key: "repo", Value: bson.D{
			{Key: "$regex", Value: "^" + regexp.QuoteMeta(q.Repo) + "$"}, {Key: "$options", Value: "i"},
		}})
	}
	out, err := s.page(ctx, filter, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("board: list cards: %w", err)
	}
	seen := make(map[string]bool, len(out))
	return slices.DeleteFunc(out, func(c Card) bool { // newest first: the first of an ID is the one kept
		dup := seen[c.ID()]
		seen[c.ID()] = true
		return dup
	}), nil
}

// page finds at most limit cards that match filter, in the board's order
// (updated_at descending, then _id). A document decodeCard refuses is
// skipped and told to ctx's WithMalformed function, and the page is filled
// from the documents after it, in as many more reads as it takes: one bad
// document (written by another release's replica during a rolling update,
// or by hand) would otherwise fail GET /board for every reader, and every
// full sync of its repository. A skipped document whose updated_at is a
// date and _id a string has a place in that order, and the next read
// starts after it; one without is left out of the next reads by its _id.
// A read after a place matches only documents whose updated_at is a date
// ($lt compares only values of its operand's BSON type), so an updated_at
// of another type, which sorts apart from the dates (a string or a number
// after every date, newest first), is met only by the page's first read;
// no card comes after it, so the page lists every card it would have all
// the same
// (https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/).
func (s *MongoStore) page(ctx context.Context, filter bson.D, limit int) ([]Card, error) {
	var (
		out      []Card
		unplaced bson.A // _ids of skipped documents without a place
		lastAt   time.Time
		lastID   string // "": no document read yet
	)
	for {
		need := limit - len(out)
		f := slices.Clone(filter)
		if lastID != "" {
			f = append(f, bson.E{Key: "$or", Value: bson.A{
				bson.D{{Key: "updated_at", Value: bson.D{{Key: "$lt", Value: lastAt}}}},
				bson.D{{Key: "updated_at", Value: lastAt}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: lastID}}}},
			}})
		}
		if len(unplaced) > 0 {
			f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$nin", Value: unplaced}}})
		}
		opts := options.Find().
			SetSort(bson.D{{Key: "updated_at", Value: -1}, {Key: "_id", Value: 1}}).
			SetLimit(int64(need))
		docs, err := mongostore.FindAll(ctx, s.coll, f, opts, mongostore.DecodeListed(decodeCard))
		if err != nil {
			return nil, err
		}
		skipped := false
		for _, d := range docs {
			if d.Err == nil {
				out = append(out, d.Value)
			} else {
				skipped = true
				reportMalformed(ctx, d.IDText(), d.Err)
			}
			// A card's _id may be its legacy id: the place is the _id's.
			if id, ok := d.ID.StringValueOK(); ok && id != "" && d.Placed {
				lastAt, lastID = d.Updated, id
			} else {
				unplaced = append(unplaced, d.ID)
			}
		}
		if !skipped || len(docs) < need {
			return out, nil
		}
	}
}

// decodeCard turns a board_cards document into a card, refusing any
// document of the wrong shape, with a field Validate refuses, or whose _id
// is neither its card's ID nor its legacy id.
func decodeCard(raw bson.Raw) (Card, error) {
	var d cardDoc
	if err := mongostore.Unmarshal(raw, &d); err != nil {
		return Card{}, fmt.Errorf("%w: _id %v: %w", ErrMalformed, raw.Lookup("_id"), err)
	}
	c := Card{
		Host: d.Host, Repo: d.Repo, Number: d.Number, Title: d.Title, State: d.State,
		Labels: cloneOrNil(d.Labels), Assignees: cloneOrNil(d.Assignees),
		PullRequest: d.PullRequest, URL: d.URL, Updated: d.Updated.UTC(),
	}
	if err := c.Validate(); err != nil {
		return Card{}, fmt.Errorf("%w: _id %q: %w", ErrMalformed, d.ID, err)
	}
	if c.ID() != d.ID && legacyCardID(c.Host, c.Repo, c.Number) != d.ID {
		return Card{}, fmt.Errorf("%w: _id %q is not its card's id %q", ErrMalformed, d.ID, c.ID())
	}
	if !d.Gone.IsZero() {
		return Card{}, fmt.Errorf("%w: _id %q is a tombstone, not a card", ErrMalformed, d.ID)
	}
	return c, nil
}

// storedBar is the earliest Updated a Put over the board_cards document
// raw may store: a card's updated time, or a tombstone's bar. A document of
// the wrong shape, card or tombstone, is an ErrMalformed error.
func storedBar(raw bson.Raw) (time.Time, error) {
	var d cardDoc
	if err := mongostore.Unmarshal(raw, &d); err != nil {
		return time.Time{}, fmt.Errorf("%w: _id %v: %w", ErrMalformed, raw.Lookup("_id"), err)
	}
	if d.Gone.IsZero() {
		c, err := decodeCard(raw)
		return c.Updated, err
	}
	if err := checkKey(d.Host, d.Repo, d.Number); err != nil {
		return time.Time{}, fmt.Errorf("%w: tombstone _id %q: %w", ErrMalformed, d.ID, err)
	}
	if d.Updated.IsZero() || CardID(d.Host, d.Repo, d.Number) != d.ID {
		return time.Time{}, fmt.Errorf("%w: tombstone _id %q: updated_at %v or key %q wrong", ErrMalformed, d.ID, d.Updated, CardID(d.Host, d.Repo, d.Number))
	}
	return d.Updated.UTC(), nil
}

// Remove implements Store in one upsert that turns the card's document
// into its tombstone ($max keeps the later of the card's updated_at, an
// earlier tombstone's bar and this one's, and the later gone:
// https://www.mongodb.com/docs/manual/reference/operator/update/max/), then
// deletes the card's legacy document (the repository as given), which a
// replica of an earlier release may have written meanwhile, and the
// tombstones more than TombstoneTTL older than gone.
func (s *MongoStore) Remove(ctx context.Context, host, repo string, number int, gone time.Time) (bool, error) {
	if err := checkKey(host, repo, number); err != nil {
		return false, err
	}
	if err := checkGone(gone); err != nil {
		return false, err
	}
	gone = mongostore.Stamp(gone)
	id := CardID(host, repo, number)
	t := newTombstone(gone, time.Time{}, tombstone{})
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "host", Value: host}, {Key: "repo", Value: repo}, {Key: "number", Value: number}}},
		{Key: "$max", Value: bson.D{{Key: "updated_at", Value: t.bar}, {Key: "gone_at", Value: t.gone}}},
		{Key: "$unset", Value: bson.D{{Key: "title", Value: ""}, {Key: "state", Value: ""}, {Key: "labels", Value: ""},
			{Key: "assignees", Value: ""}, {Key: "pull_request", Value: ""}, {Key: "url", Value: ""}}},
	}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)
	var before struct {
		Gone any `bson:"gone_at"`
	}
	removed := true
	err := s.coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}}, update, opts).Decode(&before)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments): // no card nor tombstone: the tombstone is new
		removed = false
	case err != nil:
		return false, fmt.Errorf("board: remove card %q: %w", id, err)
	case before.Gone != nil: // a tombstone already
		removed = false
	}
	if legacy := legacyCardID(host, repo, number); legacy != id {
		res, err := s.coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: legacy}})
		if err != nil {
			return false, fmt.Errorf("board: remove card %q: its legacy document: %w", id, err)
		}
		removed = removed || res.DeletedCount > 0
	}
	if _, err := s.expire(ctx, gone.Add(-TombstoneTTL)); err != nil {
		return false, fmt.Errorf("board: remove card %q: drop expired tombstones: %w", id, err)
	}
	return removed, nil
}

// expire deletes the tombstones whose gone_at is before cutoff, through
// the index tombstones_by_gone (a date compares only with dates, so no
// card matches), and returns how many.
func (s *MongoStore) expire(ctx context.Context, cutoff time.Time) (int, error) {
	res, err := s.coll.DeleteMany(ctx, bson.D{{Key: "gone_at", Value: bson.D{{Key: "$lt", Value: cutoff}}}})
	if err != nil {
		return 0, err
	}
	return int(res.DeletedCount), nil
}

// ExpireTombstones implements Store in one delete through the index
// tombstones_by_gone: it reads the expired tombstones only, never the
// cards.
func (s *MongoStore) ExpireTombstones(ctx context.Context, now time.Time) (int, error) {
	cutoff, err := expiryOf(now)
	if err != nil {
		return 0, err
	}
	n, err := s.expire(ctx, cutoff)
	if err != nil {
		return 0, fmt.Errorf("board: expire tombstones: %w", err)
	}
	return n, nil
}

// ClaimPrune implements Store in one conditional upsert of host's document
// in board_prunes: it matches only a claim the new one wins over (another
// board's, one made every or more before at or more than every after it,
// or one whose pruned_at is no date: a malformed claim would otherwise
// refuse every claim on the host, in silence, for as long as it stood),
// so a claim that stands makes the upsert's insert collide on _id, which
// is the refusal, and of two first claims racing one inserts and the
// other collides.
func (s *MongoStore) ClaimPrune(ctx context.Context, host, board string, at time.Time, every time.Duration) (bool, error) {
	if err := checkClaim(host, board, at, every); err != nil {
		return false, err
	}
	at = mongostore.Stamp(at)
	filter := bson.D{{Key: "_id", Value: host}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "board", Value: bson.D{{Key: "$ne", Value: board}}}},
		bson.D{{Key: "pruned_at", Value: bson.D{{Key: "$lte", Value: at.Add(-every)}}}},
		bson.D{{Key: "pruned_at", Value: bson.D{{Key: "$gt", Value: at.Add(every)}}}},
		bson.D{{Key: "pruned_at", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "date"}}}}}},
	}}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "board", Value: board}, {Key: "pruned_at", Value: at}}}}
	_, err := s.claims.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
	switch {
	case mongo.IsDuplicateKeyError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("board: claim the prune of %s: %w", host, err)
	}
	return true, nil
}

// maxPrunePattern bounds the length of each regular expression Prune
// sends. MongoDB refuses a $regex pattern past 32,764 bytes ("Regular
// expression is too long"; RegexMatchExpression::kMaxPatternSize in the
// server's src/mongo/db/matcher/expression_leaf.h,
// https://github.com/mongodb/mongo; its manual's $regex page,
// https://www.mongodb.com/docs/manual/reference/operator/query/regex/,
// does not state the figure), so one expression of every board repository
// made every prune of a long --board-repos fail. Servers have been seen refusing patterns past 16,384
// bytes too (error 51091, "longer than the limit set by the application":
// https://github.com/moscajs/aedes-persistence-mongodb/pull/92), so the
// bound is half that.
const maxPrunePattern = 8 << 10

// Prune implements Store in one delete of the card documents of host whose
// repo matches none of repos, each quoted whole and compared without
// regard to case, as Cards compares a query's repo. The repositories go
// in as many anchored alternations as keep each under maxPrunePattern,
// all in the delete's one $nor, so any number of them is one delete
// (the cards keep no lower-cased repository field to match them with
// $nin, and _id holds the number beside it).
func (s *MongoStore) Prune(ctx context.Context, host string, repos []string) (int, error) {
	if _, err := checkPrune(host, repos); err != nil {
		return 0, err
	}
	filter := bson.D{notTombstone, {Key: "host", Value: host}}
	if patterns := alternations(repos, maxPrunePattern); len(patterns) > 0 {
		listed := make(bson.A, len(patterns))
		for i, p := range patterns {
			listed[i] = bson.D{{Key: "repo", Value: bson.D{{Key: "$regex", Value: p}, {Key: "$options", Value: "i"}}}}
		}
		filter = append(filter, bson.E{Key: "$nor", Value: listed})
	}
	res, err := s.coll.DeleteMany(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("board: prune cards of %s: %w", host, err)
	}
	return int(res.DeletedCount), nil
}

// alternations is repos, each quoted whole, in anchored alternations
// ("^(?:a|b)$") of at most most characters each, in order; an entry too
// long for one alone gets one of its own. None for no repos.
func alternations(repos []string, most int) []string {
	const open, close = "^(?:", ")$"
	var out []string
	var b strings.Builder
	for _, r := range repos {
		q := regexp.QuoteMeta(r)
		if b.Len() > 0 && b.Len()+1+len(q)+len(close) > most {
			out = append(out, b.String()+close)
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(open)
		} else {
			b.WriteByte('|')
		}
		b.WriteString(q)
	}
	if b.Len() > 0 {
		out = append(out, b.String()+close)
	}
	return out
}

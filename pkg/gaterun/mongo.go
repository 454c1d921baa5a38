package gaterun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// ErrMalformed reports a stored run document of the wrong shape. Get,
// ForPull and ForHead return it (wrapped, naming the document's _id and the
// field at fault) instead of a run; a listing skips the document instead
// (see WithSkipped).
var ErrMalformed = errors.New("gaterun: malformed run document")

// Collection is the collection MongoStore keeps runs in.
const Collection = "gate_runs"

// MongoStore is the MongoDB Store twin: collection gate_runs, one
// document per run, _id the run id, repo the name as first given and
// repo_key its [forge.RepoKey], which the lookups match and index. Every
// write, to gate_runs and to installation_sweeps, asks for write concern
// {w: "majority", j: true} ([mongostore.Durable]) whatever the server's
// default: POST /api/runs answers a Put as recorded, and the review bot
// does not report that verdict again, so a Put a failover rolled back
// would be a verdict lost.
//
// A document it cannot read as a run ([ErrMalformed]: a field of the wrong
// type or value, or a repo_key that is not its repo's, as a replica of
// another release or a hand edit may write) is an error from Get, and from ForPull and ForHead, which answer
// for a pull request's or a commit's runs together and must not decide
// from some of them; the listings (Unsettled, UnsettledIn, UnsettledAmong,
// List) skip it, report it to ctx's [WithSkipped] function, and list the
// runs after it, so that one bad document does not stop the sweep of every
// other run. It is safe for concurrent use.
type MongoStore struct {
	coll *mongo.Collection
}

var _ Store = (*MongoStore)(nil)

// runDoc is a run as gate_runs keeps it.
type runDoc struct {
	ID   string `bson:"_id"`
	Host string `bson:"host"`
	Repo string `bson:"repo"`
	// RepoKey is read raw: absent from documents written before it (the
	// store's start gives them theirs), else it must be Repo's key.
	RepoKey     bson.RawValue `bson:"repo_key"`
	Pull        int           `bson:"pull"`
	HeadSHA     string        `bson:"head_sha"`
	Context     string        `bson:"context"`
	Verdict     string        `bson:"verdict"`
	Description string        `bson:"description"`
	TargetURL   string        `bson:"target_url"`
	Created     time.Time     `bson:"created_at"`
	Updated     time.Time     `bson:"updated_at"`
	// Reported is absent from documents written before it: Updated.
	Reported time.Time `bson:"reported_at"`
	// Installation is absent from documents written before it: 0.
	Installation int64 `bson:"installation"`
	// Settled is read raw: a missing one is malformed, not false.
	Settled bson.RawValue `bson:"settled"`
}

// NewMongoStore returns a MongoStore on db's gate_runs collection,
// after creating the indexes its queries use (an existing index is kept),
// giving every document written without repo_key (by a release before
// the key) its key, so the lookups find it, and every unsettled one
// written without reported_at its updated_at (see Run.Reported).
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	coll := db.Collection(Collection, options.Collection().SetWriteConcern(mongostore.Durable))
	err := mongostore.CreateIndexes(ctx, coll, []mongo.IndexModel{
		{Keys: bson.D{{Key: "settled", Value: 1}, {Key: "updated_at", Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("unsettled_by_updated")},
		{Keys: bson.D{{Key: "installation", Value: 1}, {Key: "settled", Value: 1}, {Key: "updated_at", Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("unsettled_by_installation")},
		// List without a state (GET /api/runs filters by host alone, and
		// /readyz lists one run of any) sorts every run, settled ones
		// included, by updated_at: the index above starts with settled, so
		// it cannot give that order, and each such page would sort the
		// whole collection, which keeps every run ever reported.
		{Keys: bson.D{{Key: "updated_at", Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("by_updated")},
		{Keys: bson.D{{Key: "host", Value: 1}, {Key: "repo_key", Value: 1}, {Key: "pull", Value: 1}},
			Options: options.Index().SetName("by_pull_key")},
		{Keys: bson.D{{Key: "host", Value: 1}, {Key: "repo_key", Value: 1}, {Key: "head_sha", Value: 1}},
			Options: options.Index().SetName("by_head_key")},
	})
	if err != nil {
		return nil, fmt.Errorf("gaterun: create %s indexes: %w", Collection, err)
	}
	if err := backfillRepoKeys(ctx, coll); err != nil {
		return nil, err
	}
	if err := backfillReported(ctx, coll); err != nil {
		return nil, err
	}
	return &MongoStore{coll: coll}, nil
}

// backfillRepoKeys sets repo_key on every document that has none, from its
// repo, so the lookups find it. A document whose repo is not a string is
// left for decodeRun to report as malformed.
func backfillRepoKeys(ctx context.Context, coll *mongo.Collection) error {
	return backfill(ctx, coll, "repo_key", "repo", bson.D{}, func(v bson.RawValue) (any, bool) {
		repo, ok := v.StringValueOK()
		return forge.RepoKey(repo), ok && repo != ""
	})
}

// backfillReported sets reported_at on every unsettled document that has
// none (written by a release before it) to its updated_at, the time of its
// last Put unless it was moved since, so that a later Move, which changes
// updated_at alone, does not make it the verdict its commit reported last.
// A settled run decides nothing, and its next Put writes reported_at.
func backfillReported(ctx context.Context, coll *mongo.Collection) error {
	return backfill(ctx, coll, "reported_at", "updated_at", bson.D{{Key: "settled", Value: false}}, func(v bson.RawValue) (any, bool) {
		at, ok := v.TimeOK()
		return at, ok
	})
}

// backfill sets field on every document matching filter that has none, to
// value of the document's from field (skipped when value says no), one
// conditional write each: the update matches only while field is still
// missing and from unchanged, so replicas starting together agree and a
// write since the read (a Put, a Move) is not undone.
func backfill(ctx context.Context, coll *mongo.Collection, field, from string, filter bson.D, value func(bson.RawValue) (any, bool)) error {
	missing := append(filter, bson.E{Key: field, Value: bson.D{{Key: "$exists", Value: false}}})
	type legacy struct {
		id   string
		from bson.RawValue
	}
	docs, err := mongostore.FindAll(ctx, coll, missing, options.Find().SetProjection(bson.D{{Key: from, Value: 1}}),
		func(raw bson.Raw) (legacy, error) {
			id, _ := raw.Lookup("_id").StringValueOK() // a malformed one gets nothing; reads report it
			return legacy{id: id, from: raw.Lookup(from)}, nil
		})
	if err != nil {
		return fmt.Errorf("gaterun: find %s documents without %s: %w", Collection, field, err)
	}
	for _, d := range docs {
		v, ok := value(d.from)
		if d.id == "" || !ok {
			continue
		}
		match := append(bson.D{{Key: "_id", Value: d.id}, {Key: from, Value: d.from}}, missing...)
		if _, err := coll.UpdateOne(ctx, match, bson.D{{Key: "$set", Value: bson.D{{Key: field, Value: v}}}}); err != nil {
			return fmt.Errorf("gaterun: set %s of run %q: %w", field, d.id, err)
		}
	}
	return nil
}

// Put implements Store, in one conditional upsert.
func (s *MongoStore) Put(ctx context.Context, run Run, now time.Time) (bool, error) {
	if err := run.Validate(); err != nil {
		return false, err
	}
	now = mongostore.Stamp(now)
	update := bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "host", Value: run.Host}, {Key: "repo_key", Value: forge.RepoKey(run.Repo)},
			{Key: "pull", Value: run.Pull}, {Key: "head_sha", Value: run.HeadSHA},
			{Key: "context", Value: run.Context}, {Key: "verdict", Value: string(run.Verdict)},
			{Key: "description", Value: run.Description}, {Key: "target_url", Value: run.TargetURL},
			{Key: "updated_at", Value: now}, {Key: "reported_at", Value: now}, {Key: "settled", Value: false},
			{Key: "installation", Value: run.Installation},
		}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "created_at", Value: now}, {Key: "repo", Value: run.Repo}}},
	}
	opts := options.UpdateOne().SetUpsert(true)
	res, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: run.ID}}, update, opts)
	if mongo.IsDuplicateKeyError(err) {
		// Two first puts raced and the other inserted: ours is an update.
		res, err = s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: run.ID}}, update, opts)
	}
	if err != nil {
		return false, fmt.Errorf("gaterun: put run %q: %w", run.ID, err)
	}
	return res.UpsertedCount == 1, nil
}

// Get implements Store.
func (s *MongoStore) Get(ctx context.Context, id string) (Run, error) {
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Run{}, fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	if err != nil {
		return Run{}, fmt.Errorf("gaterun: get run %q: %w", id, err)
	}
	return decodeRun(raw)
}

// Unsettled implements Store.
func (s *MongoStore) Unsettled(ctx context.Context, since time.Time, after Cursor, limit int) ([]Run, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d is under 1", ErrInvalid, limit)
	}
	filter := bson.D{
		{Key: "settled", Value: false},
		{Key: "updated_at", Value: bson.D{{Key: "$gte", Value: mongostore.Stamp(since)}}},
	}
	return s.page(ctx, filter, after, limit)
}

// UnsettledIn implements Store, on the index unsettled_by_installation. A
// document written before the installation field has none, and is listed
// as installation 0's.
func (s *MongoStore) UnsettledIn(ctx context.Context, installation int64, since time.Time, after Cursor, limit int) ([]Run, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d is under 1", ErrInvalid, limit)
	}
	filter := bson.D{
		{Key: "installation", Value: installationIs(installation)},
		{Key: "settled", Value: false},
		{Key: "updated_at", Value: bson.D{{Key: "$gte", Value: mongostore.Stamp(since)}}},
	}
	return s.page(ctx, filter, after, limit)
}

// installationIs is the filter value of the installation field matching
// installation id; 0 also matches a document written before the field.
func installationIs(id int64) any {
	if id == 0 {
		return bson.D{{Key: "$in", Value: bson.A{int64(0), nil}}}
	}
	return id
}

// UnsettledAmong implements Store, in one query on the index
// unsettled_by_installation ($in over the installations); 0 names the
// documents written before the installation field, as in UnsettledIn.
func (s *MongoStore) UnsettledAmong(ctx context.Context, installations []int64, since time.Time, after Cursor, limit int) ([]Run, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d is under 1", ErrInvalid, limit)
	}
	if len(installations) == 0 {
		return nil, nil
	}
	in := bson.A{}
	for _, id := range installations {
		in = append(in, id)
		if id == 0 {
			in = append(in, nil)
		}
	}
	filter := bson.D{
		{Key: "installation", Value: bson.D{{Key: "$in", Value: in}}},
		{Key: "settled", Value: false},
		{Key: "updated_at", Value: bson.D{{Key: "$gte", Value: mongostore.Stamp(since)}}},
	}
	return s.page(ctx, filter, after, limit)
}

// List implements Store.
func (s *MongoStore) List(ctx context.Context, q Query) ([]Run, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	filter := bson.D{}
	if q.Host != "" {
		filter = append(filter, bson.E{Key: "host", Value: q.Host})
	}
	if q.Repo != "" {
		filter = append(filter, bson.E{Key: "repo_key", Value: forge.RepoKey(q.Repo)})
	}
	if q.Pull != 0 {
		filter = append(filter, bson.E{Key: "pull", Value: q.Pull})
	}
	if q.Installation != 0 {
		filter = append(filter, bson.E{Key: "installation", Value: q.Installation})
	}
	if q.State != StateAll {
		filter = append(filter, bson.E{Key: "settled", Value: q.State == StateSettled})
	}
	return s.page(ctx, filter, q.After, q.Limit)
}

// page finds at most limit runs that match filter and come after the
// cursor, in listing order (updated_at, then _id), each read in one reply
// (the batch size is the read's limit): no server cursor outlives the read,
// which on FerretDB's SQLite backend would hold one of its pool's
// connections until a getMore or killCursors came.
//
// A document decodeRun refuses is skipped and reported to ctx's
// WithSkipped function, and the page is filled from the documents after
// it, in as many more reads as it takes, so that a page shorter than limit
// is still the last: one bad document (written by another release's
// replica, or edited by hand) would otherwise fail every listing that
// reaches it, and with it every sweep of every run after it. A skipped
// document whose updated_at is a date and _id a string has a place in
// listing order, and the next read starts after it; one without is left
// out of the next reads by its _id.
func (s *MongoStore) page(ctx context.Context, filter bson.D, after Cursor, limit int) ([]Run, error) {
	var (
		out      []Run
		unplaced bson.A // _ids of skipped documents without a place
	)
	for {
		need := limit - len(out)
		f := append(slices.Clone(filter), afterFilter(after)...)
		if len(unplaced) > 0 {
			f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$nin", Value: unplaced}}})
		}
		opts := options.Find().
			SetSort(bson.D{{Key: "updated_at", Value: 1}, {Key: "_id", Value: 1}}).
			SetLimit(int64(need)).SetBatchSize(int32(min(need, math.MaxInt32)))
		docs, err := mongostore.FindAll(ctx, s.coll, f, opts, mongostore.DecodeListed(decodeRun))
		if err != nil {
			return nil, fmt.Errorf("gaterun: list runs: %w", err)
		}
		skipped := false
		for _, d := range docs {
			if d.Err == nil {
				out, after = append(out, d.Value), CursorAt(d.Value)
				continue
			}
			skipped = true
			reportSkipped(ctx, d.IDText(), d.Err)
			if id, ok := d.ID.StringValueOK(); ok && d.Placed {
				after = Cursor{Updated: d.Updated, ID: id}
			} else {
				unplaced = append(unplaced, d.ID)
			}
		}
		if !skipped || len(docs) < need {
			return out, nil
		}
	}
}

// afterFilter is the filter of the documents after cur in listing order;
// none for the zero Cursor.
func afterFilter(cur Cursor) bson.D {
	if cur == (Cursor{}) {
		return nil
	}
	at := mongostore.Stamp(cur.Updated)
	return bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "updated_at", Value: bson.D{{Key: "$gt", Value: at}}}},
		bson.D{{Key: "updated_at", Value: at}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: cur.ID}}}},
	}}}
}

// ForPull implements Store.
func (s *MongoStore) ForPull(ctx context.Context, host, repo string, pull int) ([]Run, error) {
	return s.find(ctx, bson.D{
		{Key: "host", Value: host}, {Key: "repo_key", Value: forge.RepoKey(repo)}, {Key: "pull", Value: pull},
		{Key: "settled", Value: false},
	}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
}

// ForHead implements Store.
func (s *MongoStore) ForHead(ctx context.Context, host, repo, sha string) ([]Run, error) {
	return s.find(ctx, bson.D{
		{Key: "host", Value: host}, {Key: "repo_key", Value: forge.RepoKey(repo)}, {Key: "head_sha", Value: sha},
		{Key: "settled", Value: false},
	}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
}

// Settle implements Store, in one conditional update; a document
// written without reported_at (by an earlier release) was reported at its
// updated_at, as decodeRun reads it. When it matches nothing, a read tells
// a missing run from one reported again.
func (s *MongoStore) Settle(ctx context.Context, id string, reported time.Time) (bool, error) {
	at := mongostore.Stamp(reported)
	res, err := s.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "reported_at", Value: at}},
			bson.D{{Key: "reported_at", Value: bson.D{{Key: "$exists", Value: false}}}, {Key: "updated_at", Value: at}},
		}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "settled", Value: true}}}})
	if err != nil {
		return false, fmt.Errorf("gaterun: settle run %q reported at %v: %w", id, at, err)
	}
	if res.MatchedCount == 1 {
		return true, nil
	}
	err = s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return false, fmt.Errorf("%w: id %q", ErrNotFound, id)
	case err != nil:
		return false, fmt.Errorf("gaterun: settle run %q: read it: %w", id, err)
	}
	return false, nil
}

// Move implements Store, in one conditional update; from 0 also matches a
// document written before the installation field, as in UnsettledIn.
func (s *MongoStore) Move(ctx context.Context, id string, from, to int64, now time.Time) (bool, error) {
	if to < 1 {
		return false, fmt.Errorf("%w: run %q: installation %d to move to is not an installation ID", ErrInvalid, id, to)
	}
	res, err := s.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "settled", Value: false}, {Key: "installation", Value: installationIs(from)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "installation", Value: to}, {Key: "updated_at", Value: mongostore.Stamp(now)}}}})
	if err != nil {
		return false, fmt.Errorf("gaterun: move run %q to installation %d: %w", id, to, err)
	}
	return res.MatchedCount == 1, nil
}

func (s *MongoStore) find(ctx context.Context, filter bson.D, opts *options.FindOptionsBuilder) ([]Run, error) {
	out, err := mongostore.FindAll(ctx, s.coll, filter, opts, decodeRun)
	if err != nil {
		return nil, fmt.Errorf("gaterun: list runs: %w", err)
	}
	return out, nil
}

// decodeRun turns a gate_runs document into a run, refusing any document
// of the wrong shape or with a field Validate refuses.
func decodeRun(raw bson.Raw) (Run, error) {
	var d runDoc
	if err := mongostore.Unmarshal(raw, &d); err != nil {
		return Run{}, fmt.Errorf("%w: _id %v: %w", ErrMalformed, raw.Lookup("_id"), err)
	}
	settled, ok := d.Settled.BooleanOK()
	if !ok {
		return Run{}, fmt.Errorf("%w: _id %q: settled is %v, want a boolean", ErrMalformed, d.ID, d.Settled.Type)
	}
	r := Run{
		ID: d.ID, Host: d.Host, Repo: d.Repo, Pull: d.Pull, HeadSHA: d.HeadSHA,
		Context: d.Context, Verdict: Verdict(d.Verdict), Description: d.Description,
		TargetURL: d.TargetURL, Created: d.Created.UTC(), Updated: d.Updated.UTC(), Settled: settled,
		Installation: d.Installation, Reported: d.Reported.UTC(),
	}
	if d.Reported.IsZero() {
		r.Reported = r.Updated
	}
	if err := r.Validate(); err != nil {
		return Run{}, fmt.Errorf("%w: _id %q: %w", ErrMalformed, d.ID, err)
	}
	if r.Created.IsZero() || r.Updated.IsZero() {
		return Run{}, fmt.Errorf("%w: _id %q: created_at or updated_at missing", ErrMalformed, d.ID)
	}
	if err := checkRepoKey(d.RepoKey, r.Repo); err != nil {
		return Run{}, fmt.Errorf("%w: _id %q: %w", ErrMalformed, d.ID, err)
	}
	return r, nil
}

// checkRepoKey reports a repo_key that is not repo's [forge.RepoKey]: the
// lookups (ForPull, ForHead, List by repo) match repo_key, so a document
// whose key is another spelling, or another repository's, would be missed
// by every lookup of its own repository and found by another's. A missing
// one (a document written before the key, which the store's start keys)
// is none.
func checkRepoKey(key bson.RawValue, repo string) error {
	if key.Type == 0 {
		return nil
	}
	s, ok := key.StringValueOK()
	if !ok {
		return fmt.Errorf("repo_key is a BSON %v, want a string", key.Type)
	}
	if want := forge.RepoKey(repo); s != want {
		return fmt.Errorf("repo_key %q is not repo %q's key %q", s, repo, want)
	}
	return nil
}

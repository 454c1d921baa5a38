package gaterun

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// SweepsCollection is the collection MongoStore keeps installation sweeps
// in, beside the runs: one small document per installation, _id its ID
// in decimal, so its size is the App's installation count and a pass
// costs one write per installation.
const SweepsCollection = "installation_sweeps"

var _ InstallationStore = (*MongoStore)(nil)

// sweepDoc is an installation sweep as installation_sweeps keeps it: the
// sweep itself in one field, so that one $max writes it whole or not at
// all.
type sweepDoc struct {
	ID   string    `bson:"_id"` // mongostore.DecimalID's
	Last lastSweep `bson:"last"`
}

// lastSweep is a sweepDoc's sweep. Its field order is its order under
// MongoDB's comparison of embedded documents (key by key, in order:
// https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/#objects),
// which $max keeps the greatest of: the later At, then the greater Owner.
type lastSweep struct {
	At      time.Time   `bson:"at"`
	Owner   string      `bson:"owner"`
	Budgets []budgetDoc `bson:"budgets"`
	// Uncovered is absent from the records of earlier releases: 0.
	Uncovered int `bson:"uncovered"`
}

// budgetDoc is one budget figure of a sweepDoc.
type budgetDoc struct {
	Resource  string    `bson:"resource"`
	Limit     int       `bson:"limit"`
	Remaining int       `bson:"remaining"`
	Reset     time.Time `bson:"reset"`
}

// sweepsColl is installation_sweeps, written with the runs' write concern.
func (s *MongoStore) sweepsColl() *mongo.Collection {
	return s.coll.Database().Collection(SweepsCollection, options.Collection().SetWriteConcern(mongostore.Durable))
}

// recordChunk bounds the statements of one bulk write of RecordSweeps.
// FerretDB v1.24 (the test server) keeps every statement's iterator of an
// update command open until the command ends (internal/handler/
// msg_update.go: closer.Close deferred inside the statements' loop), each
// holding a connection of its SQLite pool of 100 (metadata/pool/
// opendb.go): a command of 100 statements or more waits for ever for
// another, and every request of the database after it. MongoDB takes any
// number; smaller commands cost it a round trip each.
const recordChunk = 50

// RecordSweeps implements InstallationStore, in unordered bulk writes of
// upserts, recordChunk at a time. Each upsert's filter is the
// installation's _id alone and its update a $max of the whole sweep
// (https://www.mongodb.com/docs/manual/reference/operator/update/max/), so
// the store keeps the greater of the stored and the new sweep in one
// atomic write, and a late, older pass changes nothing. A filter of a
// string _id alone is the only one FerretDB v1.24 pushes down
// (mongostore.DecimalID): with the conditional upserts this replaced (_id
// and at), a record of 1,000 installations decoded 1,000 × 1,000
// documents, 4× the time (docs/benchmarks.md, "Many installations").
func (s *MongoStore) RecordSweeps(ctx context.Context, sweeps []InstallationSweep) error {
	sweeps, err := validateSweeps(sweeps)
	if err != nil || len(sweeps) == 0 {
		return err
	}
	models := make([]mongo.WriteModel, len(sweeps))
	for i, sw := range sweeps {
		budgets := make([]budgetDoc, len(sw.Budgets))
		for j, b := range sw.Budgets {
			budgets[j] = budgetDoc{Resource: b.Resource, Limit: b.Limit, Remaining: b.Remaining, Reset: b.Reset}
		}
		models[i] = mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: mongostore.DecimalID(sw.Installation)}}).
			SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: "last", Value: lastSweep{At: sw.At, Owner: sw.Owner, Budgets: budgets, Uncovered: sw.Uncovered}}}}}).
			SetUpsert(true)
	}
	for chunk := range slices.Chunk(models, recordChunk) {
		if _, err := s.sweepsColl().BulkWrite(ctx, chunk, options.BulkWrite().SetOrdered(false)); err != nil {
			return fmt.Errorf("gaterun: record %d installation sweeps: %w", len(sweeps), err)
		}
	}
	return nil
}

// Sweeps implements InstallationStore.
func (s *MongoStore) Sweeps(ctx context.Context) ([]InstallationSweep, error) {
	out, err := mongostore.FindAll(ctx, s.sweepsColl(), bson.D{}, nil, decodeSweep)
	if err != nil {
		return nil, fmt.Errorf("gaterun: list installation sweeps: %w", err)
	}
	if out == nil {
		out = []InstallationSweep{}
	}
	slices.SortFunc(out, func(x, y InstallationSweep) int { return cmp.Compare(x.Installation, y.Installation) })
	return out, nil
}

// decodeSweep turns an installation_sweeps document into a sweep, refusing
// any document of the wrong shape (an _id not mongostore.DecimalID's included) or with
// a field Validate refuses.
func decodeSweep(raw bson.Raw) (InstallationSweep, error) {
	var d sweepDoc
	if err := mongostore.Unmarshal(raw, &d); err != nil {
		return InstallationSweep{}, fmt.Errorf("%w: %s _id %v: %w", ErrMalformed, SweepsCollection, raw.Lookup("_id"), err)
	}
	id, err := strconv.ParseInt(d.ID, 10, 64)
	if err != nil || mongostore.DecimalID(id) != d.ID {
		return InstallationSweep{}, fmt.Errorf("%w: %s _id %q is not an installation ID in decimal", ErrMalformed, SweepsCollection, d.ID)
	}
	sw := InstallationSweep{Installation: id, At: d.Last.At.UTC(), Owner: d.Last.Owner, Uncovered: d.Last.Uncovered}
	for _, b := range d.Last.Budgets {
		sw.Budgets = append(sw.Budgets, forge.RateLimit{Resource: b.Resource, Limit: b.Limit, Remaining: b.Remaining, Reset: b.Reset.UTC()})
	}
	if err := sw.Validate(); err != nil {
		return InstallationSweep{}, fmt.Errorf("%w: %s _id %q: %w", ErrMalformed, SweepsCollection, d.ID, err)
	}
	return sw, nil
}

// OpenRuns implements InstallationStore, in one aggregation over the
// unsettled runs (index unsettled_by_updated), grouped by installation; a
// document written before the installation field counts under 0. Runs
// whose installation is not an integer (a hand edit's 7.5, a string) are
// left out of the count and reported to ctx's WithSkipped function, one
// of their documents standing for all that share the value: one such
// document failed the whole count, and with it run adoption and the
// installations page, until someone deleted it. Without a WithSkipped
// function it reads nothing to name them.
func (s *MongoStore) OpenRuns(ctx context.Context) (map[int64]int, error) {
	cur, err := s.coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "settled", Value: false}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$installation"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("gaterun: count open runs: %w", err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := map[int64]int{}
	for cur.Next(ctx) {
		id, n := cur.Current.Lookup("_id"), cur.Current.Lookup("n")
		inst, okID := mongostore.Int64(id)
		if id.Type == bson.TypeNull { // no installation field
			inst, okID = 0, true
		}
		count, okN := mongostore.Int64(n)
		if !okN {
			return nil, fmt.Errorf("%w: %s: an installation %v counted %v, want an integer count", ErrMalformed, Collection, id, n)
		}
		if !okID {
			skipped := skippedFunc(ctx)
			if skipped == nil { // nobody to tell: no read to name the run
				continue
			}
			name := s.oneOpenRunOf(ctx, id)
			skipped(name, fmt.Errorf("%w: %s _id %q, with %d unsettled runs in all: installation %v, want an integer", ErrMalformed, Collection, name, count, id))
			continue
		}
		out[inst] += int(count)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("gaterun: count open runs: %w", err)
	}
	return out, nil
}

// oneOpenRunOf names one unsettled run whose installation is inst, for
// OpenRuns to report the value by: its _id, or the _id's BSON text when
// it is no string, or "unknown" when the store does not answer.
func (s *MongoStore) oneOpenRunOf(ctx context.Context, inst bson.RawValue) string {
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: "settled", Value: false}, {Key: "installation", Value: inst}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Raw()
	if err != nil {
		return "unknown"
	}
	return mongostore.IDText(raw.Lookup("_id"))
}

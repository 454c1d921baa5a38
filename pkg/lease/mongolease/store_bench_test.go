package mongolease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/pkg/lease/mongolease"
)

// BenchmarkMongoStore measures each MongoStore call against the test server
// (mongotest.URI: embedded FerretDB behind its proxy, or
// ITERION_TEST_MONGO_URI) beside a raw UpdateOne on the same server: the
// store's update document, filtered by _id alone, as an upsert beside
// Acquire and a plain update beside Renew and Release. Each iteration times
// one store call and one raw UpdateOne, alternately, so both see the same
// load. One clock, a millisecond per call, runs through the whole benchmark,
// so every call, store or raw, really writes ($max of a later expiry). It
// reports store-ns/op, raw-ns/op and their ratio, x-raw (goal: at most 1.1
// for the calls that are one round trip: all but Release's refusals).
func BenchmarkMongoStore(b *testing.B) {
	ctx := context.Background()
	db, _ := monitoredDB(b)
	st := mongolease.NewStore(db)
	raw := db.Collection("raw")
	tick := 0
	next := func() time.Time { tick++; return t0.Add(time.Duration(tick) * time.Millisecond) }
	rawWrite := func(upsert bool) error {
		update := bson.D{{Key: "$max", Value: bson.D{{Key: "expires", Value: next().Add(time.Hour)}}}}
		if upsert {
			update = append(bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "a"}}}}, update...)
		}
		_, err := raw.UpdateOne(ctx, bson.D{{Key: "_id", Value: "raw"}}, update, options.UpdateOne().SetUpsert(upsert))
		return err
	}
	rawUpsert := func() error { return rawWrite(true) }
	rawUpdate := func() error { return rawWrite(false) }
	if err := rawUpsert(); err != nil {
		b.Fatalf("seed the raw document: %v", err)
	}
	// "own" is a's from here on, held an hour past the latest call.
	if ok, err := st.Acquire(ctx, "own", "a", next(), time.Hour); !ok || err != nil {
		b.Fatalf("seed the lease: Acquire = %v, %v; want true, nil", ok, err)
	}
	want := func(wantOK bool) func(bool, error) error {
		return func(ok bool, err error) error {
			if err == nil && ok != wantOK {
				return fmt.Errorf("got %v, want %v", ok, wantOK)
			}
			return err
		}
	}
	benches := []struct {
		name  string
		raw   func() error      // the baseline
		setup func() error      // untimed, before each call
		call  func(i int) error // i counts this benchmark's calls
	}{
		{"Acquire/own", rawUpsert, nil, func(int) error {
			return want(true)(st.Acquire(ctx, "own", "a", next(), time.Hour))
		}},
		{"Acquire/takeover", rawUpsert, nil, func(i int) error {
			// Owners alternate, each taking the other's lease after its expiry.
			return want(true)(st.Acquire(ctx, "takeover", fmt.Sprint("owner-", i%2), next(), time.Millisecond))
		}},
		{"Acquire/refused", rawUpsert, nil, func(int) error {
			return want(false)(st.Acquire(ctx, "own", "b", next(), time.Hour))
		}},
		{"Renew/own", rawUpdate, nil, func(int) error {
			return want(true)(st.Renew(ctx, "own", "a", next(), time.Hour))
		}},
		{"Renew/refused", rawUpdate, nil, func(int) error {
			return want(false)(st.Renew(ctx, "own", "b", next(), time.Hour))
		}},
		{"Release/own", rawUpdate, func() error {
			return want(true)(st.Acquire(ctx, "released", "a", next(), time.Hour))
		}, func(int) error {
			return st.Release(ctx, "released", "a")
		}},
	}
	for _, bench := range benches {
		calls := 0
		b.Run(bench.name, func(b *testing.B) {
			var store, direct time.Duration
			for range b.N {
				calls++
				if bench.setup != nil {
					if err := bench.setup(); err != nil {
						b.Fatalf("setup: %v", err)
					}
				}
				start := time.Now()
				if err := bench.call(calls); err != nil {
					b.Fatalf("%s: %v", bench.name, err)
				}
				mid := time.Now()
				if err := bench.raw(); err != nil {
					b.Fatalf("raw UpdateOne: %v", err)
				}
				store += mid.Sub(start)
				direct += time.Since(mid)
			}
			b.ReportMetric(float64(store.Nanoseconds())/float64(b.N), "store-ns/op")
			b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "raw-ns/op")
			b.ReportMetric(float64(store)/float64(direct), "x-raw")
		})
	}
}

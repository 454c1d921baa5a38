package mongolease_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leasetest"
	"iterion.dev/iterion/pkg/lease/mongolease"
)

// TestMongoConformance runs the conformance suite on MongoStore, each case
// on a fresh database of the test server.
func TestMongoConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store { return mongolease.NewStore(mongotest.DB(t)) })
}

// TestMongoGroupConformance runs the lease-group cases on MongoStore, each
// on a fresh database of the test server: the group runner on the Mongo
// twin, in virtual time, with the same faults as on MemoryStore.
func TestMongoGroupConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the group cases make thousands of round trips (about 30 s); MemoryStore runs them with -short")
	}
	leasetest.RunGroup(t, func(t *testing.T) lease.Store { return mongolease.NewStore(mongotest.DB(t)) })
}

// groupGoals turns on TestMongoGroupGoals, which takes minutes.
var groupGoals = flag.Bool("lease.groupgoals", false, "run the lease-group goals at 64 shards on MongoStore (minutes)")

// TestMongoGroupGoals runs the lease-group goals at 64 shards and 10
// members on MongoStore, with -lease.groupgoals (docs/benchmarks.md records
// its figures): thousands of round trips to the test MongoDB.
func TestMongoGroupGoals(t *testing.T) {
	if !*groupGoals {
		t.Skip("thousands of round trips: run with -lease.groupgoals")
	}
	leasetest.RunGroupGoals(t, func(t *testing.T) lease.Store { return mongolease.NewStore(mongotest.DB(t)) })
}

// TestMongoGroupInvariant runs a few of the lease group's random fault
// schedules (leasetest.RunGroupInvariant) on MongoStore: no two terms of a
// shard overlap on the Mongo twin either. MemoryStore runs 1,000.
func TestMongoGroupInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("the schedules make thousands of round trips (about 20 s); MemoryStore runs them with -short")
	}
	leasetest.RunGroupInvariant(t, 4, func(t *testing.T) lease.Store { return mongolease.NewStore(mongotest.DB(t)) })
}

var t0 = time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)

// TestMongoMalformedDocument pins: a lease document of the wrong shape (a
// term that is not a string included) is an error wrapping ErrMalformed for
// every call, never an election nor a refusal, and stays as it was.
func TestMongoMalformedDocument(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	st := mongolease.NewStore(db)
	coll := db.Collection(mongolease.Collection)
	past, future := t0.Add(-time.Hour), t0.Add(time.Hour)
	docs := []struct {
		why string
		doc bson.D
	}{
		{"owner is an int, expiry past", bson.D{{Key: "owner", Value: 5}, {Key: "expires", Value: past}}},
		{"owner is an int, expiry future", bson.D{{Key: "owner", Value: 5}, {Key: "expires", Value: future}}},
		{"owner is null", bson.D{{Key: "owner", Value: nil}, {Key: "expires", Value: past}}},
		{"owner is missing", bson.D{{Key: "expires", Value: past}}},
		{"expires is a string", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: "2026-09-30T14:00:00Z"}}},
		{"expires is milliseconds", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: past.UnixMilli()}}},
		{"expires is missing", bson.D{{Key: "owner", Value: "a"}}},
		{"owner is an array holding the owner", bson.D{{Key: "owner", Value: bson.A{"a"}}, {Key: "expires", Value: future}}},
		{"owner is an array holding another", bson.D{{Key: "owner", Value: bson.A{"c"}}, {Key: "expires", Value: past}}},
		{"expires is an array holding a past date", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: bson.A{past}}}},
		{"term is an int, expiry future", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: future}, {Key: "term", Value: 5}}},
		{"term is an int, expiry past", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: past}, {Key: "term", Value: 5}}},
		{"term is null", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: future}, {Key: "term", Value: nil}}},
		{"term is an array holding the token", bson.D{{Key: "owner", Value: "a"}, {Key: "expires", Value: future}, {Key: "term", Value: bson.A{"T1"}}}},
	}
	for _, d := range docs {
		t.Run(strings.ReplaceAll(d.why, " ", "_"), func(t *testing.T) {
			name := "lease-" + strings.ToLower(rand.Text()[:8])
			doc := append(bson.D{{Key: "_id", Value: name}}, d.doc...)
			if _, err := coll.InsertOne(ctx, doc); err != nil {
				t.Fatalf("insert %v: %v", doc, err)
			}
			before := rawDoc(t, coll, name)
			for _, owner := range []string{"a", "b"} {
				ok, err := st.Acquire(ctx, name, owner, t0, time.Minute)
				if ok || !errors.Is(err, mongolease.ErrMalformed) {
					t.Errorf("Acquire(%s) by %s = %v, %v; want false, ErrMalformed: a malformed document is an error, never an election", d.why, owner, ok, err)
				}
				ok, err = st.Renew(ctx, name, owner, t0, time.Minute)
				if ok || !errors.Is(err, mongolease.ErrMalformed) {
					t.Errorf("Renew(%s) by %s = %v, %v; want false, ErrMalformed: a malformed document is an error", d.why, owner, ok, err)
				}
				if err := st.Release(ctx, name, owner); !errors.Is(err, mongolease.ErrMalformed) {
					t.Errorf("Release(%s) by %s = %v; want ErrMalformed: a malformed document is an error", d.why, owner, err)
				}
				ok, err = st.AcquireTerm(ctx, name, owner, t0, time.Minute, "T1")
				if ok || !errors.Is(err, mongolease.ErrMalformed) {
					t.Errorf("AcquireTerm(%s) by %s = %v, %v; want false, ErrMalformed: a malformed document is an error, never an election", d.why, owner, ok, err)
				}
				if err := st.ReleaseTerm(ctx, name, owner, "T1"); !errors.Is(err, mongolease.ErrMalformed) {
					t.Errorf("ReleaseTerm(%s) by %s = %v; want ErrMalformed: a malformed document is an error, not a lost lease", d.why, owner, err)
				}
			}
			if hs, err := st.Holders(ctx); !errors.Is(err, mongolease.ErrMalformed) {
				t.Errorf("Holders() with %s = %v, %v; want ErrMalformed: a malformed document is an error", d.why, hs, err)
			}
			if after := rawDoc(t, coll, name); !bytes.Equal(before, after) {
				t.Errorf("document after the calls = %s; want %s unchanged: a malformed document is never written over", after, before)
			}
			if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: name}}); err != nil {
				t.Fatalf("delete %s: %v", name, err)
			}
		})
	}
	t.Run("id_is_not_a_string", func(t *testing.T) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "owner", Value: "a"}, {Key: "expires", Value: future}}); err != nil {
			t.Fatalf("insert: %v", err)
		}
		if hs, err := st.Holders(ctx); !errors.Is(err, mongolease.ErrMalformed) {
			t.Errorf("Holders() with an int _id = %v, %v; want ErrMalformed: a malformed document is an error", hs, err)
		}
	})
}

func rawDoc(t *testing.T, coll *mongo.Collection, name string) bson.Raw {
	t.Helper()
	raw, err := coll.FindOne(context.Background(), bson.D{{Key: "_id", Value: name}}).Raw()
	if err != nil {
		t.Fatalf("find %s: %v", name, err)
	}
	return raw
}

// commandLog counts the commands a client sends, by the driver's command
// monitor. Safe for concurrent use.
type commandLog struct {
	mu     sync.Mutex
	names  []string
	writes []bson.Raw // the update and delete commands, as sent
}

func (l *commandLog) started(_ context.Context, e *event.CommandStartedEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, e.CommandName)
	if e.CommandName == "update" || e.CommandName == "delete" {
		l.writes = append(l.writes, bytes.Clone(e.Command))
	}
}

// Writes returns the update and delete commands sent so far.
func (l *commandLog) Writes() []bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bson.Raw(nil), l.writes...)
}

// since returns the commands sent since the log held n of them, and the
// count now.
func (l *commandLog) since(n int) ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names[n:]...), len(l.names)
}

// monitoredDB returns a fresh database, on the server mongotest.DB uses,
// through a client whose commands log counts.
func monitoredDB(t testing.TB) (*mongo.Database, *commandLog) {
	t.Helper()
	log := &commandLog{}
	return mongotest.MonitoredDB(t, &event.CommandMonitor{Started: log.started}), log
}

// TestMongoRoundTrips pins the command counts, by the driver's command
// monitor: Acquire, AcquireTerm and Renew are one command each whatever their answer
// (granted, refused, or a malformed document's error), so a follower's
// retry costs one round trip; Release is at most two.
func TestMongoRoundTrips(t *testing.T) {
	ctx := context.Background()
	db, log := monitoredDB(t)
	st := mongolease.NewStore(db)
	bad := bson.D{{Key: "_id", Value: "bad"}, {Key: "owner", Value: 5}, {Key: "expires", Value: t0}}
	if _, err := db.Collection(mongolease.Collection).InsertOne(ctx, bad); err != nil {
		t.Fatalf("insert %v: %v", bad, err)
	}
	_, n := log.since(0) // connection setup, if any, is not a call's
	calls := []struct {
		what string
		call func() error
		want int
		rule string
	}{
		{"Acquire of a free lease", func() error { return wantBool(st.Acquire(ctx, "n", "a", t0, time.Second)) }, 1, "Acquire is one round trip"},
		{"Acquire of one's own lease", func() error { return wantBool(st.Acquire(ctx, "n", "a", t0, time.Second)) }, 1, "Acquire is one round trip"},
		{"Renew of one's own lease", func() error { return wantBool(st.Renew(ctx, "n", "a", t0, time.Second)) }, 1, "Renew is one round trip"},
		{"Renew of an expired, untaken lease", func() error { return wantBool(st.Renew(ctx, "n", "a", t0.Add(time.Minute), time.Second)) }, 1, "Renew is one round trip"},
		{"Acquire refused", func() error { return wantRefused(st.Acquire(ctx, "n", "b", t0.Add(time.Minute), time.Second)) }, 1, "a refused Acquire is one round trip"},
		{"Renew refused", func() error { return wantRefused(st.Renew(ctx, "n", "b", t0.Add(time.Minute), time.Second)) }, 1, "a refused Renew is one round trip"},
		{"Renew of an absent lease", func() error { return wantRefused(st.Renew(ctx, "absent", "a", t0, time.Second)) }, 1, "a refused Renew is one round trip"},
		{"Acquire of a malformed lease", func() error {
			return wantErr(wantRefused(st.Acquire(ctx, "bad", "a", t0.Add(time.Minute), time.Second)), mongolease.ErrMalformed)
		}, 1, "Acquire is one round trip, a malformed document's error too"},
		{"Renew of a malformed lease", func() error {
			return wantErr(wantRefused(st.Renew(ctx, "bad", "a", t0.Add(time.Minute), time.Second)), mongolease.ErrMalformed)
		}, 1, "Renew is one round trip, a malformed document's error too"},
		{"Release of another's lease", func() error { return wantErr(st.Release(ctx, "n", "b"), lease.ErrLost) }, 2, "Release is at most two round trips"},
		{"Release of one's own lease", func() error { return st.Release(ctx, "n", "a") }, 1, "Release of one's own lease is one delete"},
		{"Release of nobody's lease", func() error { return st.Release(ctx, "n", "a") }, 2, "Release is at most two round trips"},
		{"Acquire of a second free lease", func() error { return wantBool(st.Acquire(ctx, "m", "a", t0, time.Second)) }, 1, "Acquire is one round trip"},
		{"Acquire taking over an expired lease", func() error { return wantBool(st.Acquire(ctx, "m", "b", t0.Add(time.Second), time.Second)) }, 1, "Acquire is one round trip"},
		{"AcquireTerm of a free lease", func() error { return wantBool(st.AcquireTerm(ctx, "t", "a", t0, time.Second, "T2")) }, 1, "AcquireTerm is one round trip"},
		{"AcquireTerm of one's own lease, moving its expiry", func() error {
			return wantBool(st.AcquireTerm(ctx, "t", "a", t0.Add(time.Second), time.Second, "T3"))
		}, 1, "AcquireTerm is one round trip"},
		{"AcquireTerm of one's own lease, late", func() error { return wantBool(st.AcquireTerm(ctx, "t", "a", t0, time.Second, "T1")) }, 1, "AcquireTerm is one round trip"},
		{"AcquireTerm refused", func() error { return wantRefused(st.AcquireTerm(ctx, "t", "b", t0, time.Second, "T4")) }, 1, "a refused AcquireTerm is one round trip"},
		{"AcquireTerm taking over an expired lease", func() error {
			return wantBool(st.AcquireTerm(ctx, "t", "b", t0.Add(time.Minute), time.Second, "T5"))
		}, 1, "AcquireTerm is one round trip"},
		{"AcquireTerm of a malformed lease", func() error {
			return wantErr(wantRefused(st.AcquireTerm(ctx, "bad", "a", t0.Add(time.Minute), time.Second, "T6")), mongolease.ErrMalformed)
		}, 1, "AcquireTerm is one round trip, a malformed document's error too"},
		{"Holders, a malformed document among the leases", func() error { _, err := st.Holders(ctx); return wantErr(err, mongolease.ErrMalformed) }, 1, "Holders is one query"},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var sent []string
		sent, n = log.since(n)
		if len(sent) != c.want {
			t.Errorf("%s sent %d commands %v; want %d: %s", c.what, len(sent), sent, c.want, c.rule)
		}
	}
}

func wantBool(ok bool, err error) error {
	if err == nil && !ok {
		return errors.New("got false, want true")
	}
	return err
}

func wantRefused(ok bool, err error) error {
	if err == nil && ok {
		return errors.New("got true, want false")
	}
	return err
}

func wantErr(err, want error) error {
	if !errors.Is(err, want) {
		return errors.Join(errors.New("want "+want.Error()), err)
	}
	return nil
}

// TestMongoLeaseWritesAreMajorityJournaled pins, by the driver's command
// monitor, that every lease write (update, delete) of every method carries
// write concern {w: "majority", j: true} whatever the database's own, and
// that the test server accepts it: an answered Acquire must survive a
// failover, which the server's default (w:1 on a primary-secondary-arbiter
// set) does not promise.
func TestMongoLeaseWritesAreMajorityJournaled(t *testing.T) {
	ctx := context.Background()
	db, log := monitoredDB(t)
	st := mongolease.NewStore(db)
	calls := []struct {
		what string
		call func() error
	}{
		{"Acquire", func() error { return wantBool(st.Acquire(ctx, "n", "a", t0, time.Second)) }},
		{"Renew", func() error { return wantBool(st.Renew(ctx, "n", "a", t0, time.Second)) }},
		{"Release", func() error { return st.Release(ctx, "n", "a") }},
		{"AcquireTerm", func() error { return wantBool(st.AcquireTerm(ctx, "n", "a", t0, time.Second, "T1")) }},
		{"ReleaseTerm refused", func() error { return wantErr(st.ReleaseTerm(ctx, "n", "a", "T0"), lease.ErrLost) }},
		{"ReleaseTerm", func() error { return st.ReleaseTerm(ctx, "n", "a", "T1") }},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v: the server must accept majority, journaled writes", c.what, err)
		}
	}
	writes := log.Writes()
	if len(writes) != len(calls) {
		t.Fatalf("got %d lease writes, want %d, one per call", len(writes), len(calls))
	}
	for i, w := range writes {
		wc, err := w.LookupErr("writeConcern")
		if err != nil {
			t.Errorf("%s's %s carries no writeConcern, want {w: \"majority\", j: true}: lease writes state their write concern", calls[i].what, w.Index(0).Key())
			continue
		}
		doc := wc.Document()
		wv, _ := doc.Lookup("w").StringValueOK()
		j, _ := doc.Lookup("j").BooleanOK()
		if wv != "majority" || !j {
			t.Errorf("%s's writeConcern is %s, want {w: \"majority\", j: true}: lease writes are majority, journaled", calls[i].what, doc)
		}
	}
}

// TestMongoCheckServer pins: CheckServer warns when the server is FerretDB
// (the embedded test server is), and only then.
func TestMongoCheckServer(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	var info bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	_, ferret := info["ferretdbVersion"]
	if os.Getenv(mongotest.EnvURI) == "" && !ferret {
		t.Fatalf("the embedded test server's buildInfo has no ferretdbVersion: %v", info)
	}
	var buf bytes.Buffer
	st := mongolease.NewStore(db)
	if err := st.CheckServer(ctx, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
		t.Fatalf("CheckServer: %v", err)
	}
	warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "FerretDB")
	if warned != ferret {
		t.Errorf("CheckServer logged %q on a server with ferretdbVersion=%v; want a FerretDB warning exactly when the server is FerretDB", buf.String(), ferret)
	}
	if err := st.CheckServer(ctx, nil); err != nil {
		t.Errorf("CheckServer with a nil logger = %v; want nil: a nil logger discards", err)
	}
}

// TestMongoHoldersClosesItsCursorWhenCancelled pins, by the driver's command
// monitor, that Holders closes its cursor on the server (a killCursors that
// succeeds) even when the caller's context ends between batches: a cursor
// closed with the cancelled context is never killed and stays open on the
// server until its idle timeout.
func TestMongoHoldersClosesItsCursorWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		cursor int64 // the find's cursor, once it answered
		killed []int64
	)
	mon := &event.CommandMonitor{Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch e.CommandName {
		case "find":
			cursor, _ = e.Reply.Lookup("cursor", "id").AsInt64OK()
			cancel() // the caller gives up with the first batch read
		case "killCursors":
			ids, _ := e.Reply.Lookup("cursorsKilled").Array().Values()
			for _, v := range ids {
				if id, ok := v.AsInt64OK(); ok {
					killed = append(killed, id)
				}
			}
		}
	}}
	db := mongotest.MonitoredDB(t, mon)
	// More leases than a find's first batch (101 documents), so the cursor
	// outlives it.
	var docs []any
	for i := range 150 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("n%03d", i)}, {Key: "owner", Value: "a"}, {Key: "expires", Value: t0}})
	}
	if _, err := db.Collection(mongolease.Collection).InsertMany(context.Background(), docs); err != nil {
		t.Fatalf("insert: %v", err)
	}
	st := mongolease.NewStore(db)
	if hs, err := st.Holders(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Holders() = %d holders, %v; want context.Canceled: the context ended between batches", len(hs), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if cursor == 0 {
		t.Fatalf("the find left no cursor open after its first batch, want one: the test needs a second batch")
	}
	if !slices.Contains(killed, cursor) {
		t.Errorf("cursors killed = %v, want %d among them: Holders closes its cursor on the server when its caller gives up", killed, cursor)
	}
}

// TestMongoHoldersFailsWithNoList pins Holders' error path: whatever
// stops its read (a find the store does not answer, a context ending
// between batches after some leases were read, a malformed document after
// well-formed ones, a context already ended), it returns no holders and an
// error of that kind naming what failed, never a list, empty or partial,
// a caller could take for the leases the store keeps.
func TestMongoHoldersFailsWithNoList(t *testing.T) {
	srv := mongotest.NewServer(t)
	leaseDoc := func(name string) bson.D {
		return bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: "a"}, {Key: "expires", Value: t0}}
	}
	// Each case arms its fault on db's commands through srv's proxy and
	// returns the context Holders is called with.
	cases := []struct {
		name string
		docs int    // well-formed leases before the fault
		bad  bool   // a malformed lease sorted after them
		want error  // errors.Is
		text string // in the error's text
		arm  func(t *testing.T, db string) context.Context
	}{
		{"a find the store does not answer", 3, false, context.DeadlineExceeded, "mongolease: holders",
			func(t *testing.T, db string) context.Context {
				h := srv.Proxy().Hold(func(c mongotest.Command) bool { return c.Database == db && c.Name == "find" })
				t.Cleanup(h.Release)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			}},
		{"the context ending between batches", 150, false, context.Canceled, "mongolease: holders",
			func(t *testing.T, db string) context.Context {
				// The find's first batch (101 leases) is read; the getMore
				// of the rest is held until the caller gives up.
				h := srv.Proxy().Hold(func(c mongotest.Command) bool { return c.Database == db && c.Name == "getMore" })
				t.Cleanup(h.Release)
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				go func() { <-h.Arrived(); cancel() }()
				return ctx
			}},
		{"a malformed lease after well-formed ones", 3, true, mongolease.ErrMalformed, "owner is not a string",
			func(*testing.T, string) context.Context { return context.Background() }},
		{"a context already ended", 3, false, context.Canceled, "mongolease: holders",
			func(*testing.T, string) context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := srv.DB(t)
			var docs []any
			for i := range tc.docs {
				docs = append(docs, leaseDoc(fmt.Sprintf("n%03d", i)))
			}
			if tc.bad {
				docs = append(docs, mongotest.WithField(leaseDoc("z"), "owner", 7))
			}
			if _, err := db.Collection(mongolease.Collection).InsertMany(context.Background(), docs); err != nil {
				t.Fatalf("insert: %v", err)
			}
			hs, err := mongolease.NewStore(db).Holders(tc.arm(t, db.Name()))
			if hs != nil || !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.text) {
				t.Errorf("Holders() with %s = %d holders, %v; want none and an error wrapping %v that says %q: an error is no answer, never a list taken for the leases",
					tc.name, len(hs), err, tc.want, tc.text)
			}
		})
	}
}

// TestMongoEmptyTermIsNoTerm pins that a lease document whose term is the
// empty string (written by hand, or by another writer) is a lease without
// a term, as MemoryStore keeps one, for every call: ReleaseTerm deletes
// it, whatever the token, rather than answering success and leaving it in
// place, and an AcquireTerm of its owner that moves its expiry forward
// makes the token its term.
func TestMongoEmptyTermIsNoTerm(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	st := mongolease.NewStore(db)
	coll := db.Collection(mongolease.Collection)
	insert := func(name string) {
		t.Helper()
		doc := bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: "a"}, {Key: "expires", Value: t0.Add(time.Minute)}, {Key: "term", Value: ""}}
		if _, err := coll.InsertOne(ctx, doc); err != nil {
			t.Fatalf("insert %v: %v", doc, err)
		}
	}
	insert("n")
	if err := st.ReleaseTerm(ctx, "n", "a", "T1"); err != nil {
		t.Errorf("ReleaseTerm of a's lease with term \"\" = %v; want nil: a lease without a term is released whatever the token", err)
	}
	if hs, err := st.Holders(ctx); err != nil || len(hs) != 0 {
		t.Errorf("Holders after ReleaseTerm answered = %+v, %v; want none: an answered release deleted the lease", hs, err)
	}
	insert("m")
	if ok, err := st.AcquireTerm(ctx, "m", "a", t0.Add(time.Second), time.Minute, "T2"); !ok || err != nil {
		t.Fatalf("AcquireTerm of a's own lease = %v, %v; want true, nil", ok, err)
	}
	if err := st.ReleaseTerm(ctx, "m", "a", "T1"); !errors.Is(err, lease.ErrLost) {
		t.Errorf("ReleaseTerm of another term after the re-take = %v; want ErrLost: the re-take moved the expiry, so T2 is the term", err)
	}
}

package gaterun_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
)

// writeLog keeps the write commands (insert, update, delete) a client sent.
type writeLog struct {
	mu     sync.Mutex
	writes []bson.Raw
}

func (l *writeLog) started(_ context.Context, e *event.CommandStartedEvent) {
	switch e.CommandName {
	case "insert", "update", "delete":
		l.mu.Lock()
		defer l.mu.Unlock()
		l.writes = append(l.writes, bytes.Clone(e.Command))
	}
}

// take returns the writes sent since the last take.
func (l *writeLog) take() []bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.writes
	l.writes = nil
	return out
}

// monitoredDB returns a fresh database, on the server mongotest.DB uses,
// through a client whose write commands log keeps.
func monitoredDB(t *testing.T) (*mongo.Database, *writeLog) {
	t.Helper()
	log := &writeLog{}
	return mongotest.MonitoredDB(t, &event.CommandMonitor{Started: log.started}), log
}

// TestMongoRunStoreWritesAreMajorityJournaled pins, by the driver's command
// monitor, that every write of the run store (the start's migrations, Put,
// Settle, Move, RecordSweeps) carries write concern {w: "majority", j:
// true} whatever the database's own, and that the test server accepts it:
// POST /api/runs answers a Put as recorded and the review bot does not send
// that verdict again, so it must survive a failover, which the server's
// default (w:1 on a primary-secondary-arbiter set) does not promise.
func TestMongoRunStoreWritesAreMajorityJournaled(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	db, log := monitoredDB(t)
	// A document of an earlier release, without repo_key or reported_at,
	// so the store's start writes both.
	id := gaterun.ID("github.com", "Acme/App", 4, "abc")
	legacy := bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "Acme/App"}, {Key: "pull", Value: 4},
		{Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
		{Key: "created_at", Value: now}, {Key: "updated_at", Value: now}, {Key: "settled", Value: false}}
	if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	log.take()
	var s *gaterun.MongoStore
	run := gaterun.Run{ID: gaterun.ID("github.com", "acme/app", 5, "def"), Host: "github.com", Repo: "acme/app", Pull: 5,
		HeadSHA: "def", Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess}
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"NewMongoStore's migrations", func() (err error) { s, err = gaterun.NewMongoStore(ctx, db); return err }},
		{"Put (new)", func() error { _, err := s.Put(ctx, run, now); return err }},
		{"Put (update)", func() error { _, err := s.Put(ctx, run, now.Add(time.Second)); return err }},
		{"Move", func() error { _, err := s.Move(ctx, id, 0, 7, now.Add(time.Minute)); return err }},
		{"Settle", func() error { _, err := s.Settle(ctx, run.ID, now.Add(time.Second)); return err }},
		{"RecordSweeps", func() error {
			return s.RecordSweeps(ctx, []gaterun.InstallationSweep{{Installation: 7, At: now, Owner: "web-1"}})
		}},
	} {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v: the server must accept majority, journaled writes", c.what, err)
		}
		writes := log.take()
		if len(writes) == 0 {
			t.Errorf("%s sent no write command, want one at least", c.what)
		}
		for _, w := range writes {
			wc, err := w.LookupErr("writeConcern")
			if err != nil {
				t.Errorf("%s's %s carries no writeConcern, want {w: \"majority\", j: true}: run store writes state their write concern", c.what, w.Index(0).Key())
				continue
			}
			doc := wc.Document()
			wv, _ := doc.Lookup("w").StringValueOK()
			j, _ := doc.Lookup("j").BooleanOK()
			if wv != "majority" || !j {
				t.Errorf("%s's writeConcern is %s, want {w: \"majority\", j: true}: an answered write survives a failover", c.what, doc)
			}
		}
	}
}

// TestMongoRunStorePutAgainAfterALostAnswer pins what a caller of Put may
// do when the answer is lost after the write landed (mongotest's Proxy
// drops it): the call is an error, which means no answer, and the same Put
// again (POST /api/runs answered 503, and the bot retries) finds the run
// it wrote, reports it not created, and leaves one run with the verdict.
func TestMongoRunStorePutAgainAfterALostAnswer(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	ms := mongotest.NewServer(t)
	db := ms.DB(t)
	s, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	run := gaterun.Run{ID: gaterun.ID("github.com", "acme/app", 5, "def"), Host: "github.com", Repo: "acme/app", Pull: 5,
		HeadSHA: "def", Context: gaterun.DefaultContext, Verdict: gaterun.VerdictFailure}
	drop := ms.Proxy().DropAnswer(func(c mongotest.Command) bool { return c.Name == "update" && c.Collection == gaterun.Collection })
	created, err := s.Put(ctx, run, now)
	<-drop.Done()
	if err == nil && !created {
		t.Errorf("Put whose answer was lost = not created, nil: an answer is either the write's or an error")
	}
	created, err = s.Put(ctx, run, now.Add(time.Second))
	if err != nil {
		t.Fatalf("Put again = %v, %v, want an answer", created, err)
	}
	if created {
		t.Errorf("Put again after a lost answer reports created, want not: the first write landed")
	}
	n, err := db.Collection(gaterun.Collection).CountDocuments(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Errorf("gate_runs holds %d documents, %v; want 1: a retried Put is the same run", n, err)
	}
	if got, err := s.Get(ctx, run.ID); err != nil || got.Verdict != gaterun.VerdictFailure || !got.Created.Equal(now) {
		t.Errorf("Get = %+v, %v; want failure, created at the first Put", got, err)
	}
}

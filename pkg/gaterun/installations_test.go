package gaterun_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/gaterun/gateruntest"
)

func TestMemoryInstallationStoreConformance(t *testing.T) {
	gateruntest.RunInstallations(t, func(*testing.T) gaterun.InstallationStore { return gaterun.NewMemoryStore() })
}

func TestMongoInstallationStoreConformance(t *testing.T) {
	gateruntest.RunInstallations(t, func(t *testing.T) gaterun.InstallationStore {
		s, err := gaterun.NewMongoStore(context.Background(), mongotest.DB(t))
		if err != nil {
			t.Fatalf("NewMongoStore: %v", err)
		}
		return s
	})
}

// TestMongoSweepsMalformedDocuments pins that an installation_sweeps
// document of the wrong shape, the flat one of earlier builds included, is
// an ErrMalformed error from Sweeps naming its _id, never a sweep; and that
// a record over one with the installation's own _id writes the sweep whole
// unless the document sorts after every sweep.
func TestMongoSweepsMalformedDocuments(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	last := bson.D{{Key: "at", Value: at}, {Key: "owner", Value: "web-1"}, {Key: "budgets", Value: bson.A{}}}
	for _, c := range []struct {
		name string
		doc  bson.D
		// kept: the document sorts after any sweep, so RecordSweeps's $max
		// keeps it and Sweeps goes on reporting it.
		kept bool
	}{
		{"flat, before last", bson.D{{Key: "_id", Value: "9"}, {Key: "at", Value: at}, {Key: "owner", Value: "web-1"}}, false},
		{"last is a string", bson.D{{Key: "_id", Value: "9"}, {Key: "last", Value: "yesterday"}}, false},
		{"last.at is a string", bson.D{{Key: "_id", Value: "9"}, {Key: "last", Value: mongotest.WithField(last, "at", "noon")}}, false},
		// The driver would convert these to times. A timestamp sorts after
		// every date (https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/),
		// so a sweep read from it would stay the last one for ever.
		{"last.at is a timestamp", bson.D{{Key: "_id", Value: "9"}, {Key: "last", Value: mongotest.WithField(last, "at", bson.Timestamp{T: uint32(at.Unix())})}}, true},
		{"last.at is a date string", bson.D{{Key: "_id", Value: "9"}, {Key: "last", Value: mongotest.WithField(last, "at", at.Format(time.RFC3339))}}, false},
		{"last.owner missing", bson.D{{Key: "_id", Value: "9"}, {Key: "last", Value: mongotest.WithField(last, "owner", nil)}}, false},
		{"_id a number", bson.D{{Key: "_id", Value: int64(9)}, {Key: "last", Value: last}}, false},
		{"_id not decimal", bson.D{{Key: "_id", Value: "09"}, {Key: "last", Value: last}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s, err := gaterun.NewMongoStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Collection(gaterun.SweepsCollection).InsertOne(context.Background(), c.doc); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Sweeps(context.Background()); !errors.Is(err, gaterun.ErrMalformed) || !strings.Contains(err.Error(), "9") {
				t.Errorf("Sweeps = %v, %v; want ErrMalformed naming _id 9: a malformed document is an error, never a sweep", got, err)
			}
			if c.doc[0].Value != "9" || c.kept {
				return // a record leaves it, and Sweeps keeps failing on it
			}
			sw := gaterun.InstallationSweep{Installation: 9, At: at.Add(time.Minute), Owner: "web-2"}
			if err := s.RecordSweeps(context.Background(), []gaterun.InstallationSweep{sw}); err != nil {
				t.Fatalf("RecordSweeps over it: %v", err)
			}
			if got, err := s.Sweeps(context.Background()); err != nil || len(got) != 1 || got[0].Owner != "web-2" || !got[0].At.Equal(sw.At) {
				t.Errorf("Sweeps after a record over it = %+v, %v; want web-2's sweep: a record writes the sweep whole", got, err)
			}
		})
	}
}

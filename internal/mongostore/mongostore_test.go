package mongostore_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestCreateIndexesKeepsExistingIndexes pins that a store starts on a database
// whose indexes exist already, as every replica after the first, and every
// restart, finds them: CreateIndexes succeeds again and the indexes are there.
func TestCreateIndexesKeepsExistingIndexes(t *testing.T) {
	coll := mongotest.DB(t).Collection("things")
	models := []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetName("by_a")},
		{Keys: bson.D{{Key: "b", Value: -1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("by_b")},
	}
	for i := range 2 {
		if err := mongostore.CreateIndexes(context.Background(), coll, models); err != nil {
			t.Fatalf("CreateIndexes, start %d: got %v, want nil: existing indexes are kept", i+1, err)
		}
	}
	specs, err := coll.Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	for _, want := range []string{"by_a", "by_b"} {
		if !slices.Contains(names, want) {
			t.Errorf("indexes: got %v, want %s among them: CreateIndexes creates every model", names, want)
		}
	}
}

// TestUnmarshalTakesOnlyEachFieldsBSONType pins that a stored value of
// another BSON type than its field's is an error naming the field, even
// where the driver would convert it, because the stores' queries compare
// by BSON type and would never match it; numbers of any width are one type.
func TestUnmarshalTakesOnlyEachFieldsBSONType(t *testing.T) {
	type doc struct {
		S  string    `bson:"s"`
		B  bool      `bson:"b"`
		N  int       `bson:"n"`
		At time.Time `bson:"at"`
	}
	at := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, key string
		value     any
		ok        bool
	}{
		{"a string is a string", "s", "x", true},
		{"null is no string", "s", bson.Null{}, false},
		{"a number is no bool", "b", int32(1), false},
		{"a whole double is a number", "n", 4.0, true},
		{"an int64 is a number", "n", int64(4), true},
		{"a boolean is no number", "n", true, false},
		{"a date is a time", "at", at, true},
		{"an ISO string is no time", "at", at.Format(time.RFC3339), false},
		{"an int64 is no time", "at", at.UnixMilli(), false},
		{"a timestamp is no time", "at", bson.Timestamp{T: uint32(at.Unix())}, false},
	} {
		raw, err := bson.Marshal(bson.D{{Key: c.key, Value: c.value}})
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		err = mongostore.Unmarshal(raw, &d)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: got %v, want nil", c.name, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), c.key)):
			t.Errorf("%s: got %v (%+v), want an error naming %s", c.name, err, d, c.key)
		}
	}
}

// TestUnmarshalTakesOnlyANumberItsFieldHolds pins that an integer field
// takes a number only as it is: a double beyond int64's range, or infinite,
// is an error naming the field, where the driver read -1e19, 2^63 and
// -Inf as -9223372036854775808, a value nobody stored.
func TestUnmarshalTakesOnlyANumberItsFieldHolds(t *testing.T) {
	type doc struct {
		N   int64 `bson:"n"`
		N32 int32 `bson:"n32"`
	}
	for _, c := range []struct {
		name, key string
		value     any
		want      int64 // when taken
		ok        bool
	}{
		{"a whole double within range is its integer", "n", float64(1 << 62), 1 << 62, true},
		{"-2^63 as a double is the least int64", "n", -math.Pow(2, 63), math.MinInt64, true},
		{"-1e19 is below int64's range", "n", -1e19, 0, false},
		{"2^63 as a double is past int64's range", "n", math.Pow(2, 63), 0, false},
		{"-Inf is no integer", "n", math.Inf(-1), 0, false},
		{"NaN is no integer", "n", math.NaN(), 0, false},
		{"a fraction is no integer", "n", 7.5, 0, false},
		{"an int64 past int32's range does not fit an int32", "n32", int64(1) << 31, 0, false},
		{"an int32 fits an int32", "n32", int32(-5), -5, true},
	} {
		raw, err := bson.Marshal(bson.D{{Key: c.key, Value: c.value}})
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		err = mongostore.Unmarshal(raw, &d)
		got := d.N + int64(d.N32)
		switch {
		case c.ok && (err != nil || got != c.want):
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), c.key)):
			t.Errorf("%s: got %d, %v; want an error naming %s", c.name, got, err, c.key)
		}
	}
}

// TestUnmarshalRefusesAKeyOfAnotherCase pins that a key that is a
// field's only in lower case ("Repo" for "repo") is an error naming it,
// at any depth, where the driver read it into the field: MongoDB's field
// names are case-sensitive, so the store's queries of the field never
// match such a document, and beside the field's own key the later of the
// two was the value read. A key that is no field's in any case is left
// alone.
func TestUnmarshalRefusesAKeyOfAnotherCase(t *testing.T) {
	type budget struct {
		Limit int `bson:"limit"`
	}
	type doc struct {
		Repo    string    `bson:"repo"`
		Last    budget    `bson:"last"`
		Budgets []budget  `bson:"budgets"`
		Pointed []*budget `bson:"pointed"`
		Owner   string    // untagged: the driver's key is "owner"
	}
	for _, c := range []struct {
		name string
		doc  bson.D
		key  string // "": taken
	}{
		{"a field's key in another case", bson.D{{Key: "Repo", Value: "acme/app"}}, "Repo"},
		{"after the field's own key", bson.D{{Key: "repo", Value: "acme/app"}, {Key: "REPO", Value: "other/app"}}, "REPO"},
		{"in an embedded document", bson.D{{Key: "last", Value: bson.D{{Key: "Limit", Value: 1}}}}, "last.Limit"},
		{"in an array's document", bson.D{{Key: "budgets", Value: bson.A{bson.D{{Key: "limit", Value: 1}}, bson.D{{Key: "LIMIT", Value: 2}}}}}, "budgets.1.LIMIT"},
		{"in an array's document behind a pointer", bson.D{{Key: "pointed", Value: bson.A{bson.D{{Key: "Limit", Value: 1}}}}}, "pointed.0.Limit"},
		{"an untagged field's key in another case", bson.D{{Key: "Owner", Value: "acme"}}, "Owner"},
		{"an untagged field's own key is taken", bson.D{{Key: "owner", Value: "acme"}}, ""},
		{"a key of no field is left alone", bson.D{{Key: "repo", Value: "acme/app"}, {Key: "Newer", Value: 1}}, ""},
	} {
		raw, err := bson.Marshal(c.doc)
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		err = mongostore.Unmarshal(raw, &d)
		switch {
		case c.key == "" && err != nil:
			t.Errorf("%s: got %v, want it taken", c.name, err)
		case c.key != "" && (err == nil || !strings.Contains(err.Error(), "key "+c.key+":")):
			t.Errorf("%s: got %+v, %v; want an error naming %s", c.name, d, err, c.key)
		}
	}
}

// TestInt64TakesOnlyANumberAnInt64Holds pins Int64 on a stored value: an
// int32, an int64, or a double with no fraction from -2^63 to below 2^63
// is its integer; anything else, a fraction or a string of digits among
// them, is not (the driver's AsInt64OK would read 7.5 as 7).
func TestInt64TakesOnlyANumberAnInt64Holds(t *testing.T) {
	for _, c := range []struct {
		name  string
		value any
		want  int64
		ok    bool
	}{
		{"an int32", int32(-7), -7, true},
		{"an int64", int64(1) << 40, 1 << 40, true},
		{"a whole double", 4.0, 4, true},
		{"-2^63 as a double", -math.Pow(2, 63), math.MinInt64, true},
		{"2^63 as a double is past int64's range", math.Pow(2, 63), 0, false},
		{"a fraction", 7.5, 0, false},
		{"NaN", math.NaN(), 0, false},
		{"a string of digits", "7", 0, false},
		{"a boolean", true, 0, false},
		{"null", bson.Null{}, 0, false},
	} {
		typ, data, err := bson.MarshalValue(c.value)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := mongostore.Int64(bson.RawValue{Type: typ, Value: data})
		if ok != c.ok || got != c.want {
			t.Errorf("%s: got %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestDecodeListedKeepsEachDocumentsPlace pins what a listing keeps of a
// document: decode's value or refusal, a copy of its _id (the cursor
// reuses its buffer), its updated_at in UTC and Placed only when that is
// a date; and IDText names a string _id as it is and any other by its
// BSON text.
func TestDecodeListedKeepsEachDocumentsPlace(t *testing.T) {
	at := time.Date(2026, 9, 30, 9, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	refuse := errors.New("refused")
	decode := mongostore.DecodeListed(func(raw bson.Raw) (string, error) {
		if s, ok := raw.Lookup("v").StringValueOK(); ok {
			return s, nil
		}
		return "", refuse
	})
	for _, c := range []struct {
		name   string
		doc    bson.D
		value  string
		err    error
		idText string
		placed bool
	}{
		{"a document decode takes", bson.D{{Key: "_id", Value: "r1"}, {Key: "updated_at", Value: at}, {Key: "v", Value: "x"}}, "x", nil, "r1", true},
		{"a document decode refuses", bson.D{{Key: "_id", Value: "r2"}, {Key: "updated_at", Value: at}, {Key: "v", Value: 1}}, "", refuse, "r2", true},
		{"an updated_at of no date", bson.D{{Key: "_id", Value: int32(7)}, {Key: "updated_at", Value: at.Format(time.RFC3339)}}, "", refuse, `{"$numberInt":"7"}`, false},
	} {
		raw, err := bson.Marshal(c.doc)
		if err != nil {
			t.Fatal(err)
		}
		l, err := decode(raw)
		if err != nil {
			t.Fatalf("%s: got %v, want a Listed: a refusal is kept, not returned", c.name, err)
		}
		clear(raw) // the cursor's next document overwrites the buffer
		if l.Value != c.value || !errors.Is(l.Err, c.err) || l.IDText() != c.idText || l.Placed != c.placed {
			t.Errorf("%s: got value %q, err %v, _id %q, placed %v; want %q, %v, %q, %v", c.name, l.Value, l.Err, l.IDText(), l.Placed, c.value, c.err, c.idText, c.placed)
		}
		if c.placed && (!l.Updated.Equal(at) || l.Updated.Location() != time.UTC) {
			t.Errorf("%s: got updated %v, want %v in UTC", c.name, l.Updated, at.UTC())
		}
	}
}

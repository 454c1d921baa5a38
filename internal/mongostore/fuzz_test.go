package mongostore_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/internal/testing/mongotest"
)

// fuzzDoc has a field of each kind the stores' documents hold, each read
// through Unmarshal's strict registry.
type fuzzDoc struct {
	S    string    `bson:"s"`
	B    bool      `bson:"b"`
	N    int       `bson:"n"`
	N32  int32     `bson:"n32"`
	N64  int64     `bson:"n64"`
	At   time.Time `bson:"at"`
	List []string  `bson:"list"`
	Sub  struct {
		N  int       `bson:"n"`
		At time.Time `bson:"at"`
	} `bson:"sub"`
}

// fuzzKeys are fuzzDoc's keys, and one it does not have.
var fuzzKeys = []string{"s", "b", "n", "n32", "n64", "at", "list", "sub", "other"}

// FuzzUnmarshal pins what Unmarshal promises for any document a hand edit
// or a downgrade may leave: no panic; a refusal names the field
// ("error decoding key ..."); a key that is a field's in another case
// ("B" for "b") is refused, not read into the field; and a value it takes
// is the stored one, unchanged, so a document read and written back is
// the same document.
// The fuzzer writes one field: a key of fuzzDoc's (picked by key), of any
// BSON type (typ), its bytes as given (a value they do not make is not a
// document and is skipped), after another field holding a string.
func FuzzUnmarshal(f *testing.F) {
	at := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	for _, v := range []struct {
		key int
		val any
	}{
		{0, "x"}, {0, bson.Null{}}, {1, true}, {1, int32(1)}, {2, 4.0}, {2, 4.5}, {2, int64(4)},
		{3, int64(1) << 40}, {3, -3.0}, {4, float64(1 << 62)}, {4, -1e15}, {5, at}, {5, at.UnixMilli()},
		{5, bson.Timestamp{T: uint32(at.Unix())}}, {6, bson.A{"a", "b"}}, {6, bson.A{"a", int32(1)}},
		{7, bson.D{{Key: "n", Value: 2.0}, {Key: "at", Value: at}}}, {7, bson.D{{Key: "n", Value: "2"}}},
		{8, math.Inf(1)},
	} {
		typ, data, err := bson.MarshalValue(v.val)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(v.key), byte(typ), data)
	}
	f.Fuzz(func(t *testing.T, key, typ byte, data []byte) {
		name := fuzzKeys[int(key)%len(fuzzKeys)]
		doc := bsoncore.NewDocumentBuilder().AppendString("first", "x").Build()
		elem := append(bsoncore.AppendHeader(nil, bsoncore.Type(typ), name), data...)
		doc = bsoncore.BuildDocument(nil, append(doc[4:len(doc)-1:len(doc)-1], elem...))
		if !mongotest.Valid(doc) {
			return // not a document: no server returns it
		}
		var d fuzzDoc
		elems, _ := doc.Elements()
		if err := mongostore.Unmarshal(bson.Raw(doc), &d); err != nil {
			for _, e := range elems {
				if strings.HasPrefix(err.Error(), "error decoding key "+e.Key()) {
					return
				}
			}
			t.Fatalf("%v: got %v, want an error naming one of its keys: a refusal names the field", doc, err)
		}
		for _, e := range elems {
			if k := e.Key(); k != strings.ToLower(k) && slices.Contains(fuzzKeys[:len(fuzzKeys)-1], strings.ToLower(k)) {
				t.Fatalf("%v: read as %+v, want an error naming %s: a key of another case than a field's is not the field", doc, d, k)
			}
		}
		written, err := bson.Marshal(d)
		if err != nil {
			t.Fatalf("%s: write %+v back: %v", name, d, err)
		}
		stored := bson.Raw(doc).Lookup(name)
		back := bson.Raw(written).Lookup(name)
		if name == "other" || stored.Type == bson.TypeNull || stored.Type == bson.TypeUndefined {
			return // not read, or read as no value: written back as the zero one
		}
		if !sameValue(stored, back) {
			t.Fatalf("%s: stored %v, read %+v, written back as %v; want the stored value: a value Unmarshal takes is not changed", name, stored, d, back)
		}
	})
}

// sameValue reports whether b, a value as bson.Marshal writes it, holds
// what a, a stored one, does: a number of any width the same number, a
// document or an array the same values in the same order.
func sameValue(a, b bson.RawValue) bool {
	if x, ok := a.AsFloat64OK(); ok {
		if b.Type != bson.TypeInt32 && b.Type != bson.TypeInt64 {
			y, ok := b.AsFloat64OK()
			return ok && x == y
		}
		y, _ := b.AsInt64OK()
		// float64(y) rounds: compare as integers too, where x is one.
		return x == float64(y) && (a.Type == bson.TypeDouble || equalInts(a, y))
	}
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		as, _ := bsoncore.Document(a.Value).Elements()
		bs, _ := bsoncore.Document(b.Value).Elements()
		if a.Type == bson.TypeEmbeddedDocument {
			// Written back, a document has every field of its struct and
			// no other: compare the stored ones it has.
			for _, e := range as {
				got, err := bsoncore.Document(b.Value).LookupErr(e.Key())
				if err == nil && e.Value().Type != bsoncore.TypeNull && !sameValue(raw(e.Value()), raw(got)) {
					return false
				}
			}
			return true
		}
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if !sameValue(raw(as[i].Value()), raw(bs[i].Value())) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

func equalInts(a bson.RawValue, y int64) bool {
	x, ok := a.AsInt64OK()
	return ok && x == y
}

func raw(v bsoncore.Value) bson.RawValue {
	return bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
}

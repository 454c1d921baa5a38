package mongotest_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestWithFieldReplacesOrLeavesOut pins WithField: a value replaces the
// key's, nil leaves the key out, and the document given is not modified.
func TestWithFieldReplacesOrLeavesOut(t *testing.T) {
	doc := bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "x"}}
	for _, c := range []struct {
		v    any
		want bson.D
	}{
		{"y", bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "y"}}},
		{nil, bson.D{{Key: "a", Value: 1}}},
	} {
		if got := mongotest.WithField(doc, "b", c.v); !reflect.DeepEqual(got, c.want) {
			t.Errorf("WithField(b, %v): got %v, want %v", c.v, got, c.want)
		}
	}
	if want := (bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "x"}}); !reflect.DeepEqual(doc, want) {
		t.Errorf("the document given became %v, want %v unchanged", doc, want)
	}
}

// TestValidChecksEveryDepth pins Valid: a document is well-formed only
// when it and the documents and arrays it holds are, at any depth: here a
// string "x" that claims more bytes than it has, or a document without
// its terminating zero.
func TestValidChecksEveryDepth(t *testing.T) {
	// longString corrupts the length of the innermost string "x" (its
	// bytes 02 00 00 00 'x' 00 are last but the enclosing terminators).
	longString := func(raw []byte) {
		i := bytes.LastIndex(raw, []byte{2, 0, 0, 0, 'x', 0})
		binary.LittleEndian.PutUint32(raw[i:], 100)
	}
	for _, c := range []struct {
		name    string
		doc     bson.D
		corrupt func([]byte) // nil: well-formed
	}{
		{"a document", bson.D{{Key: "s", Value: "x"}}, nil},
		{"at the top", bson.D{{Key: "s", Value: "x"}}, longString},
		{"no terminating zero", bson.D{{Key: "s", Value: "x"}}, func(raw []byte) { raw[len(raw)-1] = 1 }},
		{"in an embedded document", bson.D{{Key: "d", Value: bson.D{{Key: "s", Value: "x"}}}}, longString},
		{"in an array", bson.D{{Key: "a", Value: bson.A{"x"}}}, longString},
		{"two levels down", bson.D{{Key: "d", Value: bson.D{{Key: "a", Value: bson.A{"x"}}}}}, longString},
		{"in a code's scope", bson.D{{Key: "c", Value: bson.CodeWithScope{Code: "f", Scope: bson.D{{Key: "s", Value: "x"}}}}}, longString},
	} {
		raw, err := bson.Marshal(c.doc)
		if err != nil {
			t.Fatal(err)
		}
		if c.corrupt != nil {
			c.corrupt(raw)
		}
		if got, want := mongotest.Valid(raw), c.corrupt == nil; got != want {
			t.Errorf("%s: Valid = %v, want %v", c.name, got, want)
		}
	}
}

package board

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// cardKeys are the keys of a board_cards document.
var cardKeys = []string{"_id", "host", "repo", "number", "title", "state", "labels", "assignees", "pull_request", "url", "updated_at", "gone_at"}

// FuzzDecodeCard pins what the board's reads promise of any board_cards
// document a hand edit or another release may leave: no panic; a refusal,
// by decodeCard or storedBar, wraps ErrMalformed; a card decodeCard takes
// is the stored one, so that Put would write back the same fields; and
// storedBar of a card is its updated_at. The fuzzer starts from a card
// (tomb false) or a tombstone and sets one field (key, picked by its
// index) to a value of any BSON type, its bytes as given.
func FuzzDecodeCard(f *testing.F) {
	at := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		tomb bool
		key  int
		val  any
	}{
		{false, 3, int64(12)}, {false, 3, 12.0}, {false, 3, 12.5}, {false, 3, "12"}, {false, 0, "github.com/Acme/App#12"},
		{false, 0, "github.com/acme/app#13"}, {false, 5, "merged"}, {false, 6, bson.A{"bug", int32(1)}}, {false, 6, bson.Null{}},
		{false, 7, bson.A{}}, {false, 8, int32(1)}, {false, 10, at.Format(time.RFC3339)}, {false, 11, at}, {false, 11, "x"},
		{true, 10, at}, {true, 10, bson.Null{}}, {true, 3, 12.0}, {true, 1, "GitHub.com"}, {true, 2, "acme"},
	} {
		typ, data, err := bson.MarshalValue(c.val)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c.tomb, byte(c.key), byte(typ), data)
	}
	f.Fuzz(func(t *testing.T, tomb bool, key, typ byte, data []byte) {
		card := Card{Host: "github.com", Repo: "acme/app", Number: 12, Title: "t", State: "open",
			Labels: []string{"bug"}, Assignees: []string{}, URL: "https://github.com/acme/app/issues/12",
			Updated: time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)}
		doc := append(bson.D{{Key: "_id", Value: card.ID()}}, cardFields(card)...)
		if tomb {
			doc = bson.D{{Key: "_id", Value: card.ID()}, {Key: "host", Value: card.Host}, {Key: "repo", Value: card.Repo},
				{Key: "number", Value: card.Number}, {Key: "updated_at", Value: card.Updated}, {Key: "gone_at", Value: card.Updated}}
		}
		name := cardKeys[int(key)%len(cardKeys)]
		var elems []byte
		for _, e := range doc {
			if e.Key == name {
				continue
			}
			typ, data, err := bson.MarshalValue(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			elems = append(bsoncore.AppendHeader(elems, bsoncore.Type(typ), e.Key), data...)
		}
		elems = append(bsoncore.AppendHeader(elems, bsoncore.Type(typ), name), data...)
		raw := bson.Raw(bsoncore.BuildDocument(nil, elems))
		if !mongotest.Valid(raw) {
			return // not a document: no server returns it
		}
		bar, barErr := storedBar(raw)
		if barErr != nil && !errors.Is(barErr, ErrMalformed) {
			t.Fatalf("storedBar(%v): got %v, want an error wrapping ErrMalformed", raw, barErr)
		}
		c, err := decodeCard(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decodeCard(%v): got %v, want an error wrapping ErrMalformed", raw, err)
			}
			return
		}
		if barErr != nil || !bar.Equal(c.Updated) {
			t.Fatalf("%v: storedBar got %v, %v; want the card's updated_at %v", raw, bar, barErr, c.Updated)
		}
		written, err := bson.Marshal(cardFields(c))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range cardFields(c) {
			stored, back := raw.Lookup(e.Key), bson.Raw(written).Lookup(e.Key)
			if !sameStored(stored, back) {
				t.Fatalf("%s: stored %v, read %+v, written back as %v; want the stored value", e.Key, stored, c, back)
			}
		}
	})
}

// sameStored reports whether back, a field as Put writes it, holds what
// stored does: the same number whatever its width, else the same value;
// anything for a missing, null or undefined field.
func sameStored(stored, back bson.RawValue) bool {
	if x, ok := stored.AsFloat64OK(); ok {
		i, isInt := stored.AsInt64OK()
		j, _ := back.AsInt64OK()
		y, _ := back.AsFloat64OK()
		return x == y && (!isInt || stored.Type == bson.TypeDouble || i == j)
	}
	if stored.Type == 0 || stored.Type == bson.TypeNull || stored.Type == bson.TypeUndefined {
		return true // no value: read as the zero one (labels: none)
	}
	return stored.Equal(back)
}

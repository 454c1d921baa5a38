package mongotokens

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge"
)

// FuzzDecode pins what Get promises of any installation_tokens document a
// hand edit or an earlier build may leave: no panic; a refusal wraps
// forge.ErrMalformedToken and never quotes the token; and a token it
// serves is the stored one, installation id's, so that Put would write
// back the same document. The fuzzer sets installation (of any BSON type,
// its bytes as given; type 0 leaves it out), the token (after "ghs_"),
// minted_by and the two instants.
func FuzzDecode(f *testing.F) {
	at := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	add := func(id int64, installation any, secret, by string, expires, minted time.Time) {
		var typ bson.Type
		var data []byte
		if installation != nil {
			var err error
			if typ, data, err = bson.MarshalValue(installation); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(id, byte(typ), data, secret, by, expires.UnixMilli(), minted.UnixMilli())
	}
	add(7, int64(7), "secret-token", "w1", at.Add(time.Hour), at)
	add(7, nil, "secret-token", "w1", at.Add(time.Hour), at)
	add(7, int32(7), "secret-token", "", at.Add(time.Hour), at)
	add(7, 7.0, "secret-token", "w1", at.Add(time.Hour), at)
	add(7, int64(8), "secret-token", "w1", at.Add(time.Hour), at)
	add(7, "7", "secret-token", "w1", at.Add(time.Hour), at)
	add(1<<40, float64(1<<40), "", "w1", at, at)
	f.Fuzz(func(t *testing.T, id int64, typ byte, data []byte, secret, by string, expires, minted int64) {
		elems := bsoncore.AppendStringElement(nil, "_id", mongostore.DecimalID(id))
		if typ != 0 {
			elems = append(bsoncore.AppendHeader(elems, bsoncore.Type(typ), "installation"), data...)
		}
		token := "ghs_" + secret
		elems = bsoncore.AppendStringElement(elems, "token", token)
		elems = bsoncore.AppendDateTimeElement(elems, "expires_at", expires)
		elems = bsoncore.AppendStringElement(elems, "minted_by", by)
		elems = bsoncore.AppendDateTimeElement(elems, "minted_at", minted)
		raw := bson.Raw(bsoncore.BuildDocument(nil, elems))
		if !mongotest.Valid(raw) {
			return // not a document: no server returns it
		}
		tok, err := decode(id, raw)
		if err != nil {
			if !errors.Is(err, forge.ErrMalformedToken) {
				t.Fatalf("%v: got %v, want an error wrapping forge.ErrMalformedToken", raw, err)
			}
			if len(secret) >= 8 && strings.Contains(err.Error(), token) {
				t.Fatalf("%v: got %q, want an error that does not quote the token", raw, err)
			}
			return
		}
		if tok.Installation != id {
			t.Fatalf("%v: got installation %d's token for installation %d", raw, tok.Installation, id)
		}
		written, err := bson.Marshal(document(tok))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"_id", "installation", "token", "expires_at", "minted_by", "minted_at"} {
			stored, err := raw.LookupErr(key)
			if err != nil {
				continue // absent: the earlier format
			}
			if back := bson.Raw(written).Lookup(key); !sameNumberOrValue(stored, back) {
				t.Fatalf("%s: stored %v, served as %v and written back as %v; want the stored value", key, stored, tok, back)
			}
		}
	})
}

// sameNumberOrValue reports whether a and b are the same number, whatever
// their BSON types, or else the same BSON value.
func sameNumberOrValue(a, b bson.RawValue) bool {
	x, okA := a.AsFloat64OK()
	y, okB := b.AsFloat64OK()
	if okA && okB {
		// Each as a float64 and, where both are integers, as an int64.
		i, intA := a.Int64OK()
		j, intB := b.Int64OK()
		return x == y && (!intA || !intB || i == j)
	}
	return a.Equal(b)
}

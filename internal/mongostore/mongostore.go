// Package mongostore is what the project's MongoDB stores (gating runs,
// board cards, webhook deliveries) and their memory twins share: the
// instant as BSON keeps it, creating their indexes in a way every
// MongoDB-wire server this project runs on accepts, the test server
// included, reading a query's documents through the store's own
// decoder, and decoding a document without converting between BSON types.
package mongostore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Stamp is t as BSON keeps it, so both twins of a store agree: UTC,
// truncated to the millisecond. (pkg/lease keeps its own, lease.Stamp, to
// stay on the standard library alone.)
func Stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// Durable is the write concern of a store's writes whose answer a caller
// acts on as landed: acknowledged by a majority of the replica set's voting
// members, each having written it to its journal, so a failover does not
// roll back a write already answered (a write only the old primary held
// is undone when it rejoins:
// https://www.mongodb.com/docs/manual/core/replica-set-rollbacks/). The
// server's default is no such promise: w:1 on a set with arbiters whose
// data-bearing voting members are no more than the voting majority, such as
// primary-secondary-arbiter
// (https://www.mongodb.com/docs/manual/reference/mongodb-defaults/). Pass
// it to the collection (options.Collection().SetWriteConcern). The lease
// store states the same concern for its own writes (pkg/lease/mongolease).
var Durable = &writeconcern.WriteConcern{W: writeconcern.WCMajority, Journal: new(true)}

// DecimalID is the _id of a document keyed by a number, such as an
// installation ID: the number in decimal, a string. FerretDB v1.24, the
// test server, pushes a filter down to SQLite only when it is an _id
// alone, a string or an ObjectID (internal/backends/sqlite/collection.go,
// Query); with a numeric _id every lookup decoded the whole collection in
// Go, 4× the time at 1,000 documents (docs/benchmarks.md).
func DecimalID(id int64) string { return strconv.FormatInt(id, 10) }

// CreateIndexes creates models on coll one at a time; an existing index of the
// same name and keys is kept. One at a time because the MongoDB-wire test
// server (FerretDB v1, internal/testing/mongotest, iterion dev-mongo) drops the
// connection when one createIndexes names two or more indexes that already
// exist, which every replica after the first would send. The first error
// is returned unwrapped; the indexes before it stay created.
func CreateIndexes(ctx context.Context, coll *mongo.Collection, models []mongo.IndexModel) error {
	for _, m := range models {
		if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// Unmarshal is bson.Unmarshal that takes a value only of the BSON type its
// Go field holds: a string field only a string, a bool only a boolean, an
// integer only a number its type holds (int32, int64, or a double with no
// fraction, as Int64 reads it), a time.Time only a date. The driver's own
// decoders convert the others (a number to a bool, an ISO string, int64 or
// timestamp to a time, a boolean to an integer, null to a zero value), so
// a document of the wrong shape would read as a well-formed one that the
// store's queries never match: MongoDB's $gt, $gte, $lt and $lte match
// only values of the query value's BSON type, and equality tells a
// boolean from a number
// (https://www.mongodb.com/docs/manual/reference/operator/query-comparison/).
// A missing field stays zero. The error names the field
// ("error decoding key updated_at: ...").
func Unmarshal(raw bson.Raw, v any) error {
	if err := checkKeys(raw, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := bson.NewDecoder(bson.NewDocumentReader(bytes.NewReader(raw)))
	dec.SetRegistry(strict)
	return dec.Decode(v)
}

// checkKeys refuses a key of raw, a document decoded into a t, that is
// not a field's key but is one in lower case ("Repo" for "repo"), at any
// depth of the structs t holds. The driver decodes such a key into the
// field, but MongoDB's field names are case-sensitive
// (https://www.mongodb.com/docs/manual/core/document/#field-names), so
// the store's queries of the field never match it; beside the field's
// own key, the later of the two would be the value read.
func checkKeys(raw bson.Raw, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() == "time" || t.PkgPath() == "go.mongodb.org/mongo-driver/v2/bson" {
		return nil
	}
	fields := fieldsOf(t)
	elems, err := raw.Elements()
	if err != nil {
		return err
	}
	for _, e := range elems {
		ft, ok := fields[e.Key()]
		if !ok {
			if _, lower := fields[strings.ToLower(e.Key())]; lower {
				return fmt.Errorf("error decoding key %s: a key of another case than the field's %s", path+e.Key(), strings.ToLower(e.Key()))
			}
			continue
		}
		switch v := e.Value(); v.Type {
		case bson.TypeEmbeddedDocument:
			err = checkKeys(v.Document(), ft, path+e.Key()+".")
		case bson.TypeArray:
			vals, _ := v.Array().Values()
			for i, item := range vals {
				if doc, ok := item.DocumentOK(); ok && err == nil {
					err = checkKeys(doc, ft, fmt.Sprintf("%s%s.%d.", path, e.Key(), i))
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// structFields caches fieldsOf by struct type: the stores decode the same
// few types for every document they read.
var structFields sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf is the struct type t's exported fields by the key the driver
// gives each (its bson tag's name, else its name in lower case), with the
// field's type.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := structFields.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("bson"), ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if f.IsExported() && name != "-" {
			fields[name] = f.Type
		}
	}
	structFields.Store(t, fields)
	return fields
}

// strict is the registry Unmarshal decodes with: the driver's own decoders,
// each behind a check of the value's BSON type.
var strict = func() *bson.Registry {
	base, r := bson.NewRegistry(), bson.NewRegistry()
	only := func(want string, types ...bson.Type) bson.ValueDecoder {
		return bson.ValueDecoderFunc(func(dc bson.DecodeContext, vr bson.ValueReader, v reflect.Value) error {
			if !slices.Contains(types, vr.Type()) {
				return fmt.Errorf("a BSON %v, want %s", vr.Type(), want)
			}
			dec, err := base.LookupDecoder(v.Type())
			if err != nil {
				return err
			}
			return dec.DecodeValue(dc, vr, v)
		})
	}
	r.RegisterKindDecoder(reflect.String, only("a string", bson.TypeString))
	r.RegisterKindDecoder(reflect.Bool, only("a boolean", bson.TypeBoolean))
	for _, k := range []reflect.Kind{reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64} {
		r.RegisterKindDecoder(k, bson.ValueDecoderFunc(decodeInt))
	}
	r.RegisterTypeDecoder(reflect.TypeFor[time.Time](), only("a date", bson.TypeDateTime))
	return r
}()

// decodeInt is the strict registry's decoder of an integer field: a
// number Int64 takes, refused unless the field's type holds it. The
// driver's own decoder takes a double below -2^63, -Inf, or 2^63 exactly
// for the least int64: a hand-edited -1e19 would read as
// -9223372036854775808.
func decodeInt(_ bson.DecodeContext, vr bson.ValueReader, v reflect.Value) error {
	var n int64
	var err error
	switch t := vr.Type(); t {
	case bson.TypeInt32:
		var i int32
		i, err = vr.ReadInt32()
		n = int64(i)
	case bson.TypeInt64:
		n, err = vr.ReadInt64()
	case bson.TypeDouble:
		var f float64
		if f, err = vr.ReadDouble(); err == nil {
			var ok bool
			if n, ok = wholeInt64(f); !ok {
				return fmt.Errorf("%v is not an integer an int64 holds", f)
			}
		}
	default:
		return fmt.Errorf("a BSON %v, want a number", t)
	}
	if err != nil {
		return err
	}
	if !v.CanSet() || v.OverflowInt(n) {
		return fmt.Errorf("%d does not fit a %v", n, v.Type())
	}
	v.SetInt(n)
	return nil
}

// Int64 is v as an integer, when v is one: an int32, an int64, or a
// double with no fraction within int64's range, as Unmarshal reads an
// integer field. (The driver's AsInt64OK truncates a double: 7.5 would
// read as 7.)
func Int64(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		n, ok := v.Int32OK()
		return int64(n), ok
	case bson.TypeInt64:
		return v.Int64OK()
	case bson.TypeDouble:
		f, ok := v.DoubleOK()
		if !ok {
			return 0, false
		}
		return wholeInt64(f)
	}
	return 0, false
}

// wholeInt64 is f as an int64 when f has no fraction and int64 holds it:
// from -2^63 to below 2^63.
func wholeInt64(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= -math.MinInt64 {
		return 0, false
	}
	return int64(f), true
}

// FindAll runs a find of filter with opts on coll and returns every
// document turned into a T by decode, in the cursor's order. It stops at
// the first error: the find's or the cursor's, returned unwrapped, or
// decode's, returned as decode made it.
func FindAll[T any](ctx context.Context, coll *mongo.Collection, filter bson.D, opts *options.FindOptionsBuilder,
	decode func(bson.Raw) (T, error)) ([]T, error) {
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var out []T
	for cur.Next(ctx) {
		v, err := decode(cur.Current)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, cur.Err()
}

// Listed is a document a listing read: its value, or why decode refused it
// (Err), with its _id and, when updated_at is a date, that instant
// (Placed): its place in a listing ordered by updated_at and _id, so that
// a listing can skip a document it cannot read and go on after it.
type Listed[T any] struct {
	Value   T
	Err     error
	ID      bson.RawValue
	Updated time.Time
	Placed  bool
}

// IDText is l's _id as a log line or a caller names it: the string, or
// the BSON value's text for an _id of another type.
func (l Listed[T]) IDText() string { return IDText(l.ID) }

// IDText is the _id id as a log line or a caller names it: the string, or
// the BSON value's text for an _id of another type.
func IDText(id bson.RawValue) string {
	if s, ok := id.StringValueOK(); ok {
		return s
	}
	return id.String()
}

// DecodeListed is decode for FindAll that turns a document decode refuses
// into a Listed with Err set rather than an error, so the listing goes on
// past it.
func DecodeListed[T any](decode func(bson.Raw) (T, error)) func(bson.Raw) (Listed[T], error) {
	return func(raw bson.Raw) (Listed[T], error) {
		v, err := decode(raw)
		// The cursor's buffer is reused by its next document: keep a copy.
		id := raw.Lookup("_id")
		id.Value = slices.Clone(id.Value)
		updated, placed := raw.Lookup("updated_at").TimeOK()
		return Listed[T]{Value: v, Err: err, ID: id, Updated: updated.UTC(), Placed: placed}, nil
	}
}

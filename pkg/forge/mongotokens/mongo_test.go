package mongotokens_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/mongotokens"
	"iterion.dev/iterion/pkg/forge/tokenstest"
)

// TestConformance runs the TokenStore conformance suite on Store.
func TestConformance(t *testing.T) {
	tokenstest.Run(t, func(t *testing.T) forge.TokenStore { return mongotokens.NewStore(mongotest.DB(t)) })
}

// TestMalformedDocumentIsANamedErrorWithoutTheToken pins that a document
// of the wrong shape is reported, wrapping ErrMalformedToken and naming the
// installation and the field, and that the error never quotes the token.
func TestMalformedDocumentIsANamedErrorWithoutTheToken(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	s := mongotokens.NewStore(db)
	exp := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name  string
		doc   bson.D
		field string
	}{
		{"token not a string", bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: 42}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "token"},
		{"expiry a string", bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: "ghs_secret"}, {Key: "expires_at", Value: "ghs_secret"}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "expires_at"},
		{"no expiry", bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: "ghs_secret"}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "expires_at"},
		{"empty token", bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: ""}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "token"},
		{"another installation's token", bson.D{{Key: "_id", Value: "7"}, {Key: "installation", Value: int64(8)}, {Key: "token", Value: "ghs_secret"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "installation is 8"},
		{"installation a fraction, read as 7 by a truncating decode", bson.D{{Key: "_id", Value: "7"}, {Key: "installation", Value: 7.5}, {Key: "token", Value: "ghs_secret"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "installation"},
		{"no minted_at", bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: "ghs_secret"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}}, "minted_at"},
		{"minted_by not a string", bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: "ghs_secret"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: 3}, {Key: "minted_at", Value: exp}}, "minted_by"},
		{"installation not a number", bson.D{{Key: "_id", Value: "7"}, {Key: "installation", Value: "ghs_secret"}, {Key: "token", Value: "ghs_secret"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}, "installation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			coll := db.Collection(mongotokens.Collection)
			if _, err := coll.DeleteMany(ctx, bson.D{}); err != nil {
				t.Fatal(err)
			}
			if _, err := coll.InsertOne(ctx, tc.doc); err != nil {
				t.Fatal(err)
			}
			_, ok, err := s.Get(ctx, 7)
			if !errors.Is(err, forge.ErrMalformedToken) || ok {
				t.Fatalf("Get(7) = ok %v, %v; want ErrMalformedToken", ok, err)
			}
			if !strings.Contains(err.Error(), "installation 7") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q: want it to name installation 7 and the field %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "ghs_secret") {
				t.Errorf("error %q quotes the token", err)
			}
			// A fresh Put replaces the malformed document.
			if err := s.Put(ctx, forge.InstallationToken{Installation: 7, Token: "ghs_fresh", ExpiresAt: exp}); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := s.Get(ctx, 7); err != nil || !ok || got.Token != "ghs_fresh" {
				t.Errorf("Get(7) after a Put over the malformed document: ok %v, %v; want the fresh token", ok, err)
			}
		})
	}
}

// TestNumericIDIsNotRead pins that a document keyed by the installation ID
// as a number, as earlier builds stored it, is not read as the
// installation's token: Get finds none (so the replica mints one) and a
// Put writes the decimal _id beside it.
func TestNumericIDIsNotRead(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	s := mongotokens.NewStore(db)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	old := bson.D{{Key: "_id", Value: int64(7)}, {Key: "token", Value: "ghs_old"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}
	if _, err := db.Collection(mongotokens.Collection).InsertOne(ctx, old); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Get(ctx, 7); err != nil || ok {
		t.Fatalf("Get(7) over a numeric _id = %v, ok %v, %v; want none: the _id is the ID in decimal", got.Token != "", ok, err)
	}
	if err := s.Put(ctx, forge.InstallationToken{Installation: 7, Token: "ghs_new", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Collection(mongotokens.Collection).CountDocuments(ctx, bson.D{{Key: "_id", Value: "7"}}); err != nil || n != 1 {
		t.Errorf("documents with _id \"7\" after a Put = %d, %v; want 1", n, err)
	}
}

// TestADocumentWithoutItsInstallationIsReadAsItsIDs pins that a document
// written before documents named their installation is still read, as
// the token of its _id's installation, and that a Put names it.
func TestADocumentWithoutItsInstallationIsReadAsItsIDs(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	s := mongotokens.NewStore(db)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	old := bson.D{{Key: "_id", Value: "7"}, {Key: "token", Value: "ghs_old"}, {Key: "expires_at", Value: exp}, {Key: "minted_by", Value: "w"}, {Key: "minted_at", Value: exp}}
	if _, err := db.Collection(mongotokens.Collection).InsertOne(ctx, old); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Get(ctx, 7); err != nil || !ok || got.Installation != 7 || got.Token != "ghs_old" {
		t.Fatalf("Get(7) of a document without installation = installation %d (ok %v, %v), want installation 7's token", got.Installation, ok, err)
	}
	if err := s.Put(ctx, forge.InstallationToken{Installation: 7, Token: "ghs_new", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Collection(mongotokens.Collection).CountDocuments(ctx, bson.D{{Key: "_id", Value: "7"}, {Key: "installation", Value: int64(7)}}); err != nil || n != 1 {
		t.Errorf("documents of _id \"7\" naming installation 7 after a Put = %d, %v; want 1", n, err)
	}
}

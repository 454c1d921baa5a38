package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestDevMongoServesAndStops checks the dev-mongo contract: it prints one
// line, mongodb://ADDR/?serverMonitoringMode=poll, once it accepts
// connections; a client using that URI works; cancelling its context (what
// SIGINT/SIGTERM do) stops it with a nil error (exit status 0).
func TestDevMongoServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := devMongo(ctx, []string{"--listen", "127.0.0.1:0", "--dir", t.TempDir()}, w)
		_ = w.Close()
		done <- err
	}()
	lines := bufio.NewScanner(r)
	if !lines.Scan() {
		t.Fatalf("dev-mongo printed nothing (err %v), want its URI", <-done)
	}
	uri := lines.Text()
	if !strings.HasPrefix(uri, "mongodb://127.0.0.1:") || !strings.HasSuffix(uri, "/?serverMonitoringMode=poll") {
		t.Fatalf("got %q, want mongodb://ADDR/?serverMonitoringMode=poll: the printed line is the URI", uri)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	opCtx, opCancel := context.WithTimeout(ctx, 20*time.Second)
	defer opCancel()
	if _, err := c.Database("dev").Collection("docs").InsertOne(opCtx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("got %v, want a write to succeed: the server accepts connections once the URI is printed", err)
	}
	_ = c.Disconnect(opCtx)
	go func() { _, _ = io.Copy(io.Discard, r) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("got %v after cancellation, want nil: dev-mongo stops cleanly on SIGINT/SIGTERM", err)
	}
}

// TestDevMongoRejectsBadArguments checks that a stray argument or a missing
// data directory is an error naming it, and nothing is printed.
func TestDevMongoRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:0", "extra"}, `"extra"`},
		{[]string{"--listen", "127.0.0.1:0", "--dir", "/nonexistent-iterion-dir"}, "/nonexistent-iterion-dir"},
	} {
		var out strings.Builder
		err := devMongo(context.Background(), tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %q: got error %v, want one naming %s", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("args %q: printed %q, want nothing: the URI is printed only once serving", tc.args, out.String())
		}
	}
}

package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
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
// SIGINT/SIGTERM do) stops it with a nil error (exit status 0); and a
// later dev-mongo on the same --dir serves what the first stored.
func TestDevMongoServesAndStops(t *testing.T) {
	dir := t.TempDir()
	serve(t, dir, func(ctx context.Context, coll *mongo.Collection) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatalf("got %v, want a write to succeed: the server accepts connections once the URI is printed", err)
		}
	})
	serve(t, dir, func(ctx context.Context, coll *mongo.Collection) {
		if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil || n != 1 {
			t.Fatalf("got %d documents, %v on a restart, want 1: --dir keeps the data", n, err)
		}
	})
}

// serve runs dev-mongo on dir, calls use with a collection through its
// printed URI, and stops it as SIGINT/SIGTERM do.
func serve(t *testing.T, dir string, use func(context.Context, *mongo.Collection)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := devMongo(ctx, []string{"--listen", "127.0.0.1:0", "--dir", dir}, w)
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
	use(opCtx, c.Database("dev").Collection("docs"))
	_ = c.Disconnect(opCtx)
	go func() { _, _ = io.Copy(io.Discard, r) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("got %v after cancellation, want nil: dev-mongo stops cleanly on SIGINT/SIGTERM", err)
	}
}

// TestDevMongoRejectsBadArguments checks that a bad command line (a flag
// that does not parse, a stray argument, an --listen net.Listen cannot
// use, a --dir that is no existing directory) exits 2 with an error
// naming the flag or argument, before anything starts, and nothing is
// printed.
func TestDevMongoRejectsBadArguments(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:0", "extra"}, `"extra"`},
		{[]string{"--listen", "127.0.0.1:0", "--dir", "/nonexistent-iterion-dir"}, `--dir "/nonexistent-iterion-dir": want an existing directory`},
		{[]string{"--listen", "127.0.0.1:0", "--dir", file}, `--dir "` + file + `": want an existing directory, not a file`},
		{[]string{"--listen", "27017"}, `--listen "27017": want HOST:PORT or :PORT`},
		{[]string{"--listen", "127.0.0.1:99999"}, `--listen "127.0.0.1:99999": want a port from 0 to 65535`},
		{[]string{"--listen", "127.0.0.1:"}, `--listen "127.0.0.1:": want HOST:PORT or :PORT: no port`},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	} {
		var out, msg strings.Builder
		err := devMongo(context.Background(), tc.args, &out)
		if code := exitCode(&msg, err); code != 2 || !strings.Contains(msg.String(), tc.want) {
			t.Errorf("args %q: exit %d, %q; want exit 2 and an error naming %s", tc.args, code, msg.String(), tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("args %q: printed %q, want nothing: the URI is printed only once serving", tc.args, out.String())
		}
	}
}

// TestDevMongoHelpExitsZero checks that -h prints the usage and exits 0,
// as Go's flag package does, with nothing on stdout.
func TestDevMongoHelpExitsZero(t *testing.T) {
	var out, msg strings.Builder
	if code := exitCode(&msg, devMongo(context.Background(), []string{"-h"}, &out)); code != 0 || out.Len() != 0 {
		t.Errorf("-h: exit %d, printed %q; want exit 0 and nothing printed", code, out.String())
	}
}

package mongotest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestFerretLogsOnlyErrors pins what of FerretDB's log reaches the
// caller's logger: its errors, not its per-connection info and warnings,
// whatever attributes or groups it adds.
func TestFerretLogsOnlyErrors(t *testing.T) {
	var buf bytes.Buffer
	h := minLevel{slog.LevelError, slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}
	for _, h := range []slog.Handler{h, h.WithAttrs([]slog.Attr{slog.String("conn", "1")}), h.WithGroup("g")} {
		for _, c := range []struct {
			level slog.Level
			want  bool
		}{{slog.LevelInfo, false}, {slog.LevelWarn, false}, {slog.LevelError, true}} {
			if got := h.Enabled(context.Background(), c.level); got != c.want {
				t.Errorf("%T: Enabled(%v) = %v, want %v: only FerretDB's errors reach the caller's log", h, c.level, got, c.want)
			}
		}
	}
}

// TestCloseRemovesOnlyTheDirectoryStartMade pins where a server's data
// goes: Start's temporary directory is removed by Close; StartDir's
// directory is the caller's and stays, with FerretDB's files in it
// (a database's file is made by its first write).
func TestCloseRemovesOnlyTheDirectoryStartMade(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	temp := s.tempDir
	s.Close()
	s.Close() // idempotent
	if _, err := os.Stat(temp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Start's directory %s after Close: %v, want it removed", temp, err)
	}

	dir := t.TempDir()
	s, err = StartDir(ctx, "127.0.0.1:0", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB(t).Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if files, err := os.ReadDir(dir); err != nil || len(files) == 0 {
		t.Errorf("StartDir's directory after Close: %d files, %v; want FerretDB's files kept", len(files), err)
	}
}

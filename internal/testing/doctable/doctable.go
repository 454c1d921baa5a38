// Package doctable reads the tables of the project's docs/ for tests that
// pin a table to the code it describes (serve's flags, the metrics).
package doctable

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Rows returns the rows of the table in docs/file whose header row is
// header (as written, "| a | b |"): each row's cells, trimmed, in order,
// up to the first blank line after it. It fails t when the file or the
// table is missing, or when a row has fewer cells than the header.
func Rows(t testing.TB, file, header string) [][]string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "..", "..", "docs", file)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head := cells(header)
	_, table, ok := strings.Cut(string(doc), header+"\n|"+strings.Repeat(" --- |", len(head))+"\n")
	if !ok {
		t.Fatalf("docs/%s: no table headed %s", file, header)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var rows [][]string
	for row := range strings.Lines(table) {
		c := cells(row)
		if len(c) < len(head) {
			t.Fatalf("docs/%s: row %q has %d cells, want %d: %s", file, row, len(c), len(head), header)
		}
		rows = append(rows, c)
	}
	return rows
}

// Ticked is every `code span` of cell, in order.
func Ticked(cell string) []string {
	var out []string
	for _, m := range tick.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

var tick = regexp.MustCompile("`([^`]+)`")

// cells splits a table row on the pipes outside code spans, without its
// outer pipes, each cell trimmed (an empty cell is "").
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var out []string
	start, code := 0, false
	for i, r := range row {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			out = append(out, strings.TrimSpace(row[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(row[start:]))
}

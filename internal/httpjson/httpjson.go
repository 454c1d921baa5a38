// Package httpjson writes the JSON answers of the project's HTTP handlers,
// so the merge gate's API and the board's view answer in one shape, and
// reads what encoding/json says of a request body and what a request's
// query names.
package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Write answers code with v as JSON (Content-Type application/json, and
// nosniff, so no browser reads an answer quoting a caller's text as a
// page).
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails
}

// Error answers code with {"error": msg}.
func Error(w http.ResponseWriter, code int, msg string) {
	Write(w, code, map[string]string{"error": msg})
}

// AtEnd reports whether dec, having decoded a body's value, has nothing
// left but white space. json.Decoder.More does not tell it: More is false
// before a '}' or a ']', so a body with a stray closing bracket after its
// object ({"a":1}}) would pass for one object.
func AtEnd(dec *json.Decoder) bool {
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

// UnknownField returns the field named by err when err is a
// json.Decoder's refusal of a field its target does not have (after
// DisallowUnknownFields), and whether it is one. encoding/json gives that
// error no type of its own, so UnknownField reads its text, `json: unknown
// field "name"`, in this one place.
func UnknownField(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	name, uerr := strconv.Unquote(quoted)
	if uerr != nil {
		return quoted, true
	}
	return name, true
}

// UnknownParam is "" when every parameter of query is among known, else a
// message naming the first other one, in sorted order, with a suggestion
// when one of known is close (DidYouMean), and the known ones: `unknown
// parameter "stat" (did you mean "state"?); the parameters are repo,
// state`. A list or view that takes parameters refuses one it does not
// know, as POST /api/runs refuses a body field, so a misspelt filter is
// not dropped in silence, answering everything as if unfiltered.
func UnknownParam(query url.Values, known ...string) string {
	for _, name := range slices.Sorted(maps.Keys(query)) {
		if !slices.Contains(known, name) {
			return fmt.Sprintf("unknown parameter %q%s; the parameters are %s", Clip(name), DidYouMean(name, known), strings.Join(known, ", "))
		}
	}
	return ""
}

// DidYouMean is ` (did you mean "target_url"?)` when name is one of names
// spelt another way: in another case, with or without '_' or '-'
// (targetUrl, target-url), or one letter added, missing, changed or
// swapped with its neighbour (stat, sate, staet for state); else "".
func DidYouMean(name string, names []string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	for _, f := range names {
		if a, b := norm(name), norm(f); a == b || len(b) >= 3 && oneEdit(a, b) {
			return fmt.Sprintf(" (did you mean %q?)", f)
		}
	}
	return ""
}

// oneEdit reports whether a and b differ by one byte added, removed or
// changed, or two neighbouring bytes swapped.
func oneEdit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	switch len(b) - len(a) {
	case 0:
		if i == len(a) {
			return false // equal
		}
		return a[i+1:] == b[i+1:] || i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	case 1:
		return a[i:] == b[i+1:]
	}
	return false
}

// Clip shortens a value quoted in an error, so a 1 MB field or parameter
// does not make a 1 MB answer or log line.
func Clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

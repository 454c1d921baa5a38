// Package httpjson writes the JSON answers of the project's HTTP handlers,
// so the merge gate's API and the board's view answer in one shape, and
// reads what encoding/json says of a request body.
package httpjson

import (
	"encoding/json"
	"net/http"
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

// Package httpjson writes the JSON answers of the project's HTTP handlers,
// so the merge gate's API and the board's view answer in one shape.
package httpjson

import (
	"encoding/json"
	"net/http"
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

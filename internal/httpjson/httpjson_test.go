package httpjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"iterion.dev/iterion/internal/httpjson"
)

// TestUnknownFieldReadsEncodingJSONsRefusal pins UnknownField to the error
// encoding/json returns today, so a change of its wording fails here
// rather than turning every refusal into "malformed JSON".
func TestUnknownFieldReadsEncodingJSONsRefusal(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(`{"repo": "acme/app", "targetUrl": "x"}`))
	dec.DisallowUnknownFields()
	var v struct {
		Repo string `json:"repo"`
	}
	err := dec.Decode(&v)
	if name, ok := httpjson.UnknownField(err); !ok || name != "targetUrl" {
		t.Errorf("UnknownField(%v) = %q, %v; want targetUrl, true: the decoder's refusal names the field", err, name, ok)
	}
	if name, ok := httpjson.UnknownField(errors.New("unexpected EOF")); ok {
		t.Errorf("UnknownField(unexpected EOF) = %q, true; want false: another error names no field", name)
	}
	if _, ok := httpjson.UnknownField(nil); ok {
		t.Error("UnknownField(nil) = true; want false")
	}
}

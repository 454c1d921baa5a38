package httpjson_test

import (
	"encoding/json"
	"errors"
	"net/url"
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

// TestDidYouMeanSuggestsANameOneSlipAway pins which names DidYouMean
// takes for a slip of the named one.
func TestDidYouMeanSuggestsANameOneSlipAway(t *testing.T) {
	names := []string{"repo", "state", "target_url"}
	for _, c := range []struct{ name, want, why string }{
		{"targetUrl", "target_url", "another case, without the underscore"},
		{"target-url", "target_url", "a hyphen for the underscore"},
		{"stat", "state", "a letter missing"},
		{"statee", "state", "a letter added"},
		{"stabe", "state", "a letter changed"},
		{"staet", "state", "two letters swapped"},
		{"rpeo", "repo", "two letters swapped"},
		{"sat", "", "two letters missing is no slip"},
		{"token", "", "nothing close"},
		{"", "", "an empty name"},
	} {
		want := ""
		if c.want != "" {
			want = ` (did you mean "` + c.want + `"?)`
		}
		if got := httpjson.DidYouMean(c.name, names); got != want {
			t.Errorf("DidYouMean(%q) = %q, want %q: %s", c.name, got, want, c.why)
		}
	}
}

// TestUnknownParamNamesTheFirstParameterNotKnown pins UnknownParam's
// answer: "" when every parameter is known, else the first other one in
// sorted order, with the known ones.
func TestUnknownParamNamesTheFirstParameterNotKnown(t *testing.T) {
	for _, c := range []struct{ query, want string }{
		{"", ""},
		{"repo=a&state=b&state=c", ""},
		{"zz=1&stat=settled", `unknown parameter "stat" (did you mean "state"?); the parameters are repo, state`},
		{"repo=a&Repo=b", `unknown parameter "Repo" (did you mean "repo"?); the parameters are repo, state`},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpjson.UnknownParam(q, "repo", "state"); got != c.want {
			t.Errorf("UnknownParam(%q) = %q, want %q", c.query, got, c.want)
		}
	}
}

// TestAtEndRefusesAnythingAfterTheValue pins AtEnd: only white space may
// follow a body's value, a stray closing bracket included, which
// json.Decoder.More lets pass.
func TestAtEndRefusesAnythingAfterTheValue(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
		why  string
	}{
		{`{"a":1}`, true, "the object alone"},
		{"{\"a\":1} \n\t", true, "white space after it"},
		{`{"a":1}}`, false, "a stray closing brace"},
		{`{"a":1}]`, false, "a stray closing bracket"},
		{`{"a":1} {}`, false, "a second object"},
		{`{"a":1}x`, false, "a stray character"},
	} {
		dec := json.NewDecoder(strings.NewReader(c.body))
		var v map[string]any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: decode: %v", c.body, err)
		}
		if got := httpjson.AtEnd(dec); got != c.want {
			t.Errorf("AtEnd after %q = %v, want %v: %s", c.body, got, c.want, c.why)
		}
	}
}

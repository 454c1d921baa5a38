package forge_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"iterion.dev/iterion/pkg/forge"
)

// TestParseRepo pins the repository-name rule: owner/name of ASCII letters,
// digits, '_', '.' and '-', one slash; anything else is refused naming the
// value.
func TestParseRepo(t *testing.T) {
	for _, tc := range []struct {
		in, owner, name string
		why             string
	}{
		{"acme/app", "acme", "app", "a plain name"},
		{"Acme-1/my_app.go", "Acme-1", "my_app.go", "letters, digits, '-', '_' and '.'"},
	} {
		owner, name, err := forge.ParseRepo(tc.in)
		if err != nil || owner != tc.owner || name != tc.name {
			t.Errorf("ParseRepo(%q): got %q, %q, %v, want %q, %q, nil: %s", tc.in, owner, name, err, tc.owner, tc.name, tc.why)
		}
	}
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{"acme", "no slash"},
		{"acme/", "no name"},
		{"/app", "no owner"},
		{"acme/app/x", "two slashes"},
		{"acme/a pp", "a space"},
		{"acme/app\n", "a trailing newline"},
	} {
		owner, name, err := forge.ParseRepo(tc.in)
		if !errors.Is(err, forge.ErrInvalidRepo) || !strings.Contains(err.Error(), strconv.Quote(tc.in)) || owner != "" || name != "" {
			t.Errorf("ParseRepo(%q): got %q, %q, %v, want an error wrapping ErrInvalidRepo naming the value: %s", tc.in, owner, name, err, tc.why)
		}
	}
}

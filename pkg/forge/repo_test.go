package forge_test

import (
	"errors"
	"strings"
	"testing"

	"iterion.dev/iterion/pkg/forge"
)

func TestParseRepoFollowsGitHubsNameRules(t *testing.T) {
	for _, c := range []struct {
		in, why string
		ok      bool
	}{
		{"acme/app", "plain owner and name", true},
		{"a-b/x.y_z-1", "hyphen in the owner; '.', '_' and '-' in the name", true},
		{strings.Repeat("a", 39) + "/" + strings.Repeat("n", 100), "owner of 39, name of 100 characters", true},
		{"acme/.github", "a name may start with a dot", true},
		{"../..", "a path, not a repository: owner '..' breaks the owner rule", false},
		{"./x", "owner '.' is not a login", false},
		{"acme/..", "name '..' is never a repository", false},
		{"acme/.", "name '.' is never a repository", false},
		{"acme", "no slash", false},
		{"acme/app/x", "a slash in the name", false},
		{"/app", "empty owner", false},
		{"acme/", "empty name", false},
		{"-acme/app", "leading hyphen", false},
		{"acme-/app", "trailing hyphen", false},
		{"ac--me/app", "double hyphen", false},
		{"ac_me/app", "underscore in an owner", false},
		{strings.Repeat("a", 40) + "/app", "owner over 39 characters", false},
		{"acme/" + strings.Repeat("n", 101), "name over 100 characters", false},
		{"acme/app?x=1", "query characters", false},
		{"acme/ap\x00p", "NUL", false},
		{"acme/äpp", "non-ASCII", false},
	} {
		owner, name, err := forge.ParseRepo(c.in)
		if got := err == nil; got != c.ok {
			t.Errorf("ParseRepo(%q) err = %v, want ok=%v: %s", c.in, err, c.ok, c.why)
			continue
		}
		if !c.ok && !errors.Is(err, forge.ErrInvalidRepo) {
			t.Errorf("ParseRepo(%q) err = %v, want it to wrap ErrInvalidRepo: errors are compared by kind", c.in, err)
		}
		if c.ok && owner+"/"+name != c.in {
			t.Errorf("ParseRepo(%q) = %q, %q, want the two parts of the input", c.in, owner, name)
		}
	}
}

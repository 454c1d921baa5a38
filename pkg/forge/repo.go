package forge

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrInvalidRepo reports a repository name that is not "owner/name";
// ParseRepo's errors wrap it and name the value.
var ErrInvalidRepo = errors.New("forge: invalid repository name")

// repoPattern is the repository-name rule of the merge gate's API and the
// board's configuration: owner and name of ASCII letters, digits, '_', '.'
// and '-', one slash between them.
var repoPattern = regexp.MustCompile(`^([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)$`)

// ParseRepo splits s, "owner/name", into its owner and name. A value that
// breaks the rule gets an error wrapping ErrInvalidRepo that names it.
func ParseRepo(s string) (owner, name string, err error) {
	m := repoPattern.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Errorf("%w: %q is not owner/name", ErrInvalidRepo, s)
	}
	return m[1], m[2], nil
}

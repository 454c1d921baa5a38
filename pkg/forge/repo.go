package forge

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidRepo reports a string that is not a GitHub "owner/name"; errors
// that wrap it name the part and the value.
var ErrInvalidRepo = errors.New("forge: invalid repository")

// Name limits, as GitHub enforces them when an account or repository is
// created.
const (
	// maxOwner is the longest account (user or organization) login. GitHub's
	// sign-up form: "Username may only contain alphanumeric characters or
	// single hyphens, and cannot begin or end with a hyphen", at most 39
	// characters (https://docs.github.com/en/get-started/start-your-journey/creating-an-account-on-github,
	// https://github.com/join).
	maxOwner = 39
	// maxName is the longest repository name: "The repository name can only
	// contain ASCII letters, digits, and the characters ., -, and _", at most
	// 100 characters
	// (https://docs.github.com/en/repositories/creating-and-managing-repositories/creating-a-new-repository).
	maxName = 100
)

// ParseRepo splits s, "owner/name", into its owner and repository name by
// GitHub's own rules: the owner is 1 to 39 ASCII letters, digits or single
// hyphens, neither first nor last; the name is 1 to 100 ASCII letters,
// digits, '.', '-' or '_', and never "." or "..". Anything else (a path
// segment, a query, a control character) is an error wrapping
// ErrInvalidRepo that names the bad part and quotes the value. It never
// reads the network: a well-formed name may still not exist.
func ParseRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not owner/name", ErrInvalidRepo, s)
	}
	if err := checkOwner(owner); err != nil {
		return "", "", err
	}
	if err := checkName(name); err != nil {
		return "", "", err
	}
	return owner, name, nil
}

// checkOwner applies GitHub's login rule to owner.
func checkOwner(owner string) error {
	if owner == "" || len(owner) > maxOwner {
		return fmt.Errorf("%w: owner %q: want 1 to %d characters", ErrInvalidRepo, owner, maxOwner)
	}
	if owner[0] == '-' || owner[len(owner)-1] == '-' || strings.Contains(owner, "--") {
		return fmt.Errorf("%w: owner %q: a hyphen may not begin or end it or follow another", ErrInvalidRepo, owner)
	}
	for _, c := range []byte(owner) {
		if !isAlnum(c) && c != '-' {
			return fmt.Errorf("%w: owner %q: want ASCII letters, digits and single hyphens", ErrInvalidRepo, owner)
		}
	}
	return nil
}

// checkName applies GitHub's repository name rule to name.
func checkName(name string) error {
	if name == "" || len(name) > maxName {
		return fmt.Errorf("%w: name %q: want 1 to %d characters", ErrInvalidRepo, name, maxName)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: name %q is a path element, not a repository", ErrInvalidRepo, name)
	}
	for _, c := range []byte(name) {
		if !isAlnum(c) && c != '.' && c != '-' && c != '_' {
			return fmt.Errorf("%w: name %q: want ASCII letters, digits, '.', '-' and '_'", ErrInvalidRepo, name)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// RepoKey is the canonical form of repo ("owner/name"): lower-cased, since
// GitHub compares owner and repository names without regard to case ("The
// name is not case sensitive", the owner and repo parameters of every
// repository operation, e.g. Get a pull request:
// https://docs.github.com/rest/pulls/pulls#get-a-pull-request). Two names
// GitHub takes for one repository have one key; the key is for comparing
// and indexing, the name as given for showing.
func RepoKey(repo string) string { return strings.ToLower(repo) }

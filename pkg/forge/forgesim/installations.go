package forgesim

import (
	"strconv"
	"strings"
)

// InstallationSize is what GitHub scales a GitHub App installation's
// hourly budget by. The zero value is a small installation: the minimum
// budget of 5,000.
type InstallationSize struct {
	Repositories int `json:"repositories"` // repositories the installation can reach
	Users        int `json:"users"`        // users of the organization it is on; 0 for a user account
	// EnterpriseCloud: the installation is on a GitHub Enterprise Cloud
	// organization, whose budgets are fixed and do not scale.
	EnterpriseCloud bool `json:"enterprise_cloud"`
}

// Budget is an installation's hourly budget for resource ("core" for REST,
// "graphql" for GraphQL points), by GitHub's rule: 5,000, plus 50 for each
// repository over 20 and 50 for each user over 20, at most 12,500; on
// Enterprise Cloud a fixed 15,000 REST requests ("Rate limits for the REST
// API", Primary rate limit for GitHub App installations:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#primary-rate-limit-for-github-app-installations)
// and 10,000 GraphQL points ("Rate limits and query limits for the
// GraphQL API", Primary rate limit:
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#primary-rate-limit).
func (z InstallationSize) Budget(resource string) int {
	if z.EnterpriseCloud {
		if resource == "graphql" {
			return 10_000
		}
		return 15_000
	}
	n := 5_000 + 50*max(z.Repositories-20, 0) + 50*max(z.Users-20, 0)
	return min(n, 12_500)
}

func (z InstallationSize) validate() error {
	if z.Repositories < 0 {
		return badField("repositories", strconv.Itoa(z.Repositories), "must be >= 0")
	}
	if z.Users < 0 {
		return badField("users", strconv.Itoa(z.Users), "must be >= 0")
	}
	return nil
}

// WithInstallationSize makes every installation's budget follow GitHub's
// scaling rule for size (InstallationSize.Budget) unless
// SetInstallationSize names its own; without it, an installation's budget
// is the default budget (WithBudget, DefaultBudget). Negative counts count
// as 0.
func WithInstallationSize(size InstallationSize) Option {
	size.Repositories, size.Users = max(size.Repositories, 0), max(size.Users, 0)
	return func(s *Sim) { s.installSize = &size }
}

// SetInstallationSize makes installation id's budget follow GitHub's
// scaling rule for size, from its next request on. SetBudget on one of its
// tokens still wins. An id <= 0 or a negative count is refused, naming
// the field.
func (s *Sim) SetInstallationSize(id int64, size InstallationSize) error {
	if id <= 0 {
		return badField("id", strconv.FormatInt(id, 10), "must be positive")
	}
	if err := size.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installSizes["installation:"+strconv.FormatInt(id, 10)] = size
	return nil
}

// scaledLimit is principal's budget for resource by its installation's
// size, when principal is an installation with a size; s.mu is held.
func (s *Sim) scaledLimit(principal, resource string) (int, bool) {
	if !strings.HasPrefix(principal, "installation:") {
		return 0, false
	}
	if z, ok := s.installSizes[principal]; ok {
		return z.Budget(resource), true
	}
	if s.installSize != nil {
		return s.installSize.Budget(resource), true
	}
	return 0, false
}

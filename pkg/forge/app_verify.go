package forge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v88/github"
)

// An installation webhook's body is signed, but nothing in it ties it to
// the moment it was sent: a captured "deleted" would drop an installation
// each time it is sent again. So before the server forgets anything an
// installation webhook says is gone, it asks GitHub, with the App's JWT
// (LaneApp, through the App's JWT gate and rate gate, as ForRepo and
// Relist do), whether it is gone now.

// InstallationGone asks GitHub whether installation id is gone for the
// App: deleted (GET /app/installations/{installation_id} answers 404) or
// suspended (its suspended_at is set), as "Get an installation for the
// authenticated app" documents
// (https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app).
// An error (GitHub unreachable, refused by a rate limit, another status)
// is no answer: the caller must not read it as gone. An answer is noted
// for Suspended.
func (a *AppClient) InstallationGone(ctx context.Context, id int64) (bool, error) {
	ctx = WithLane(ctx, LaneApp)
	in, _, err := a.app.gh.Apps.GetInstallation(ctx, id)
	if err != nil {
		err = a.app.wrap(ctx, fmt.Sprintf("get installation %d", id), err)
		if errors.Is(err, ErrNotFound) {
			a.mu.Lock()
			delete(a.suspended, id)
			a.mu.Unlock()
			return true, nil
		}
		return false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !suspended(in) {
		delete(a.suspended, id)
		return false, nil
	}
	a.suspendLocked(in)
	return true, nil
}

// Covers asks GitHub whether installation id covers repository full
// ("owner/name") now: GET /repos/{owner}/{repo}/installation ("Get a
// repository installation for the authenticated app",
// https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app)
// answers the installation covering it, or 404 when none does. A name
// without an owner is covered by none. An error is no answer, as in
// InstallationGone.
func (a *AppClient) Covers(ctx context.Context, id int64, full string) (bool, error) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || owner == "" || name == "" {
		return false, nil
	}
	ctx = WithLane(ctx, LaneApp)
	in, _, err := a.app.gh.Apps.GetRepositoryInstallation(ctx, owner, name)
	if err != nil {
		err = a.app.wrap(ctx, "find installation of "+full, err)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return in.GetID() == id, nil
}

// CoverChecks is how many repositories Covered asks GitHub about one by
// one (Covers); for more, it lists the installation's repositories once.
const CoverChecks = 3

// Covered returns those of repos ("owner/name", as given) installation id
// covers now, in repos' order. Up to CoverChecks are asked about one by
// one (Covers, one App JWT request each, one at a time through the App's
// JWT gate). More are checked against one list of the installation's
// repositories, "List repositories accessible to the app installation"
// (GET /installation/repositories with the installation's token, 100 a
// page:
// https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation),
// charged to ctx's lane: an installation_repositories event removing 40
// repositories costs one page rather than 40 requests, which at GitHub's
// second a request do not fit the 10 s a check may take; the list costs
// a page per 100 repositories the installation still covers, whatever
// the event names. The list is made whether or not this AppClient knows
// the installation yet (an event for an installation created moments ago
// reaches a replica before its re-list does): one it does not know gets
// a token of its own for the list (tokenClient), stored in the TokenStore
// as any. Only when GitHub refuses the installation a token (403, as for
// a suspended one, or 404: "Create an installation access token for an
// app",
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app)
// are the repositories asked about one by one. An error is no answer, as
// in Covers.
func (a *AppClient) Covered(ctx context.Context, id int64, repos []string) ([]string, error) {
	if len(repos) <= CoverChecks {
		return a.coveredEach(ctx, id, repos)
	}
	c, err := a.tokenClient(ctx, id)
	switch {
	case errors.Is(err, ErrForbidden) || errors.Is(err, ErrNotFound):
		return a.coveredEach(ctx, id, repos)
	case err != nil:
		return nil, err
	}
	has := make(map[string]bool)
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := c.gh.Apps.ListRepos(ctx, opts)
		if err != nil {
			return nil, c.wrap(ctx, fmt.Sprintf("list installation %d's repositories", id), err)
		}
		for _, r := range page.Repositories {
			has[RepoKey(r.GetFullName())] = true
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var kept []string
	for _, full := range repos {
		if has[RepoKey(full)] {
			kept = append(kept, full)
		}
	}
	return kept, nil
}

// coveredEach is Covered asking about each of repos on its own (Covers).
func (a *AppClient) coveredEach(ctx context.Context, id int64, repos []string) ([]string, error) {
	var kept []string
	for _, full := range repos {
		ok, err := a.Covers(ctx, id, full)
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, full)
		}
	}
	return kept, nil
}

// tokenClient is a Client of installation id holding a token (Mint): the
// known set's, or, for an installation the set does not have, one made
// for the caller alone and not kept, whose token is stored all the same,
// so the installation's Client serves it once the set has it. The
// error of a mint GitHub refused wraps ErrForbidden or ErrNotFound.
func (a *AppClient) tokenClient(ctx context.Context, id int64) (*Client, error) {
	if c, err := a.Installation(id); err == nil {
		if err := a.Mint(ctx, id); !errors.Is(err, ErrNotInstalled) {
			return c, err
		}
	}
	c, auth, err := a.newInstallationClient(id)
	if err != nil {
		return nil, err
	}
	if _, err := auth.token(ctx, ""); err != nil {
		return nil, err
	}
	return c, nil
}

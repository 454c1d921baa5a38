package forge

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// is no answer: the caller must not read it as gone.
func (a *AppClient) InstallationGone(ctx context.Context, id int64) (bool, error) {
	ctx = WithLane(ctx, LaneApp)
	in, _, err := a.app.gh.Apps.GetInstallation(ctx, id)
	if err != nil {
		err = a.app.wrap(ctx, fmt.Sprintf("get installation %d", id), err)
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	return suspended(in), nil
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

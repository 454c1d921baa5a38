package forgesim

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A GitHub App's installations. Each installation is on one account and
// covers a set of repositories; its tokens spend its own primary budget,
// secondary limits and CPU time (principal "installation:<id>", budget.go).
//
// Until the first installation is added, the simulator trusts every App
// with every installation ID: a token is minted for any ID, as it always
// was. Once one is added (AddInstallation, POST /_sim/installations, or
// forge-sim --installations), tokens are minted only for installations it
// has, and the rest answer 404, as GitHub does for an installation the App
// does not have.

// githubAPI stands for a request to api.github.com: the URLs of a webhook
// payload, which no request carries, are GitHub's.
var githubAPI = &http.Request{Host: "api.github.com", TLS: &tls.ConnectionState{}}

// mintedToken is an installation token the simulator minted: its
// installation, and when it expires on the simulator's clock.
type mintedToken struct {
	installation int64
	expires      time.Time
}

// unusable tells whether tok is a minted token GitHub no longer takes: its
// installation was removed since, or it expired at or before now. "When a
// token has expired or has been revoked, it can no longer be used to
// authenticate Git and API requests" ("Token expiration and revocation":
// https://docs.github.com/authentication/keeping-your-account-and-data-secure/token-expiration-and-revocation),
// and "The installation access token will expire after 1 hour"
// ("Generating an installation access token for a GitHub App":
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-an-installation-access-token-for-a-github-app);
// GitHub answers such a token 401 "Bad credentials". s.mu is held.
func (s *Sim) unusable(tok string, now time.Time) bool {
	m, ok := s.installations[tok]
	return ok && (s.removedApps[m.installation] || !now.Before(m.expires))
}

// simInstallation is one installation of the App.
type simInstallation struct {
	id      int64
	account string
	created time.Time
	repos   map[string]string // lower-case "owner/name" → as added
	// suspended is when the installation was suspended (SuspendInstallation),
	// zero while it is not; suspendedBy is who did it.
	suspended   time.Time
	suspendedBy string
	// refuseMints is true while its token mints are refused 403 for a
	// reason other than suspension (RefuseMints).
	refuseMints bool
}

// Installation is one installation as Installations lists it.
type Installation struct {
	ID           int64    `json:"id"`
	Account      string   `json:"account"`
	Repositories []string `json:"repositories"` // "owner/name", sorted
}

// Webhook is where the simulator sends installation webhooks, and the
// secret it signs them with (X-Hub-Signature-256).
type Webhook struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
	// AppID is the App the payloads name (installation.app_id); 0: 1.
	AppID int64 `json:"app_id"`
}

// WithWebhook makes the simulator send installation and
// installation_repositories webhooks to hook.URL (see SetWebhook).
func WithWebhook(hook Webhook) Option {
	return func(s *Sim) { s.hook = hook }
}

// SetWebhook makes the simulator send, from now on, an installation webhook
// (created, deleted) or an installation_repositories one (added, removed)
// to hook.URL each time installations or their repositories change, signed
// with hook.Secret as GitHub signs them ("Validating webhook deliveries":
// https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries).
// An empty URL stops the deliveries; a URL that is not absolute http(s) is
// refused, naming the field.
func (s *Sim) SetWebhook(hook Webhook) error {
	if hook.URL != "" && !strings.HasPrefix(hook.URL, "http://") && !strings.HasPrefix(hook.URL, "https://") {
		return badField("url", hook.URL, "want an absolute http(s) URL")
	}
	if hook.AppID < 0 {
		return badField("app_id", strconv.FormatInt(hook.AppID, 10), "must be >= 0")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = hook
	return nil
}

// Deliveries is how many webhooks the simulator sent and how many of them
// failed (no answer, or an answer other than 2xx).
func (s *Sim) Deliveries() (sent, failed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hooksSent, s.hooksFailed
}

// checkRepoName splits full, "owner/name", the value of field; a
// malformed one is refused, naming field.
func checkRepoName(field, full string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", badField(field, full, `want "owner/name"`)
	}
	return owner, name, nil
}

// AddInstallation adds installation id of the App on account, covering
// repos ("owner/name"; each is created if the simulator lacks it), and
// sends an installation "created" webhook. An id <= 0, a blank account, a
// malformed repository or an id already installed is refused, naming the
// field.
func (s *Sim) AddInstallation(id int64, account string, repos ...string) error {
	if id <= 0 {
		return badField("id", strconv.FormatInt(id, 10), "must be positive")
	}
	if account == "" {
		return badField("account", account, "required")
	}
	for _, full := range repos {
		if _, _, err := checkRepoName("repositories", full); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.apps[id] != nil {
		s.mu.Unlock()
		return badField("id", strconv.FormatInt(id, 10), "already installed")
	}
	in := &simInstallation{id: id, account: account, created: s.clock(), repos: make(map[string]string)}
	s.apps[id] = in
	delete(s.removedApps, id)
	added := s.coverLocked(in, repos)
	d := s.delivery("installation", object{"action": "created", "installation": s.installationJSON(nil, in), "repositories": added, "requester": nil})
	s.mu.Unlock()
	s.deliver(d)
	return nil
}

// RemoveInstallation removes installation id, whose tokens then answer 401
// and whose repositories no installation covers, and sends an installation
// "deleted" webhook. An unknown id is ErrNotFound.
func (s *Sim) RemoveInstallation(id int64) error {
	s.mu.Lock()
	in := s.apps[id]
	if in == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: installation %d", ErrNotFound, id)
	}
	delete(s.apps, id)
	s.removedApps[id] = true
	for k := range in.repos {
		delete(s.repoInstall, k)
	}
	d := s.delivery("installation", object{"action": "deleted", "installation": s.installationJSON(nil, in), "repositories": s.repoRefs(slices.Collect(mapValues(in.repos)))})
	s.mu.Unlock()
	s.deliver(d)
	return nil
}

// simAdmin is the user every change to the installations is made by: the
// webhooks' sender, and a suspension's suspended_by.
const simAdmin = "sim-admin"

// SuspendInstallation suspends installation id, as "Suspend an app
// installation" does (https://docs.github.com/rest/apps/apps#suspend-an-app-installation):
// from then on a token mint for it is refused 403 (mintRefusal), its
// installation shows suspended_at and suspended_by, and an installation
// "suspend" webhook is sent ("Webhook events and payloads", installation:
// https://docs.github.com/webhooks/webhook-events-and-payloads#installation).
// It stays listed, and its repositories stay covered. A token minted
// before that has not expired is refused 403 while the installation is
// suspended, and works again once it is unsuspended (suspendedToken).
// Suspending a suspended installation changes nothing and sends nothing.
// An unknown id is ErrNotFound.
func (s *Sim) SuspendInstallation(id int64) error {
	return s.setSuspended(id, true)
}

// UnsuspendInstallation lifts installation id's suspension ("Unsuspend an
// app installation":
// https://docs.github.com/rest/apps/apps#unsuspend-an-app-installation):
// tokens are minted for it again, those minted before and unexpired are
// taken again, and an installation "unsuspend" webhook is sent. An installation not suspended changes nothing and sends
// nothing. An unknown id is ErrNotFound.
func (s *Sim) UnsuspendInstallation(id int64) error {
	return s.setSuspended(id, false)
}

func (s *Sim) setSuspended(id int64, suspend bool) error {
	s.mu.Lock()
	in := s.apps[id]
	if in == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: installation %d", ErrNotFound, id)
	}
	if suspend == !in.suspended.IsZero() {
		s.mu.Unlock()
		return nil
	}
	action := "unsuspend"
	in.suspended, in.suspendedBy = time.Time{}, ""
	if suspend {
		action = "suspend"
		in.suspended, in.suspendedBy = s.clock().Truncate(time.Second), simAdmin
	}
	// GitHub's recorded suspend and unsuspend payloads carry the
	// installation and no repositories.
	d := s.delivery("installation", object{"action": action, "installation": s.installationJSON(nil, in)})
	s.mu.Unlock()
	s.deliver(d)
	return nil
}

// mintRefusal is GitHub's answer to a token mint for a suspended
// installation: "Create an installation access token for an app"
// documents a 403 Forbidden
// (https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app),
// and GitHub's answers, as clients have recorded them, say "This
// installation has been suspended" and name that operation's page
// (https://github.com/octokit/octokit.rb/pull/1307).
func mintRefusal() reply {
	return jsonReply(http.StatusForbidden, githubError{
		Message:          "This installation has been suspended",
		DocumentationURL: "https://docs.github.com/rest/reference/apps#create-an-installation-access-token-for-an-app",
	})
}

// suspendedToken tells whether tok is a token minted for an installation
// that is suspended now; s.mu is held. GitHub documents what a suspension
// does, not what a token minted before it gets: "When a GitHub App is
// suspended for an installation, the GitHub App cannot access resources
// owned by that installation account" ("Suspending a GitHub App
// installation":
// https://docs.github.com/apps/maintaining-github-apps/suspending-a-github-app-installation),
// and the app's "access to the GitHub API or webhook events is blocked
// for that account" ("Suspend an app installation":
// https://docs.github.com/rest/apps/apps#suspend-an-app-installation).
// What clients have recorded of GitHub's answers is the refused mint
// (mintRefusal: https://github.com/octokit/octokit.rb/pull/1307 and
// https://github.com/ossf/allstar/issues/314, both about POST
// .../access_tokens); none shows a request made with an older token. So the simulator's answer to such a request,
// REST or GraphQL, is its own choice: 403 with the mint's message,
// charged to no budget, as a 401 is not. Suspension blocks; it does not
// revoke: "Token expiration and revocation"
// (https://docs.github.com/authentication/keeping-your-account-and-data-secure/token-expiration-and-revocation)
// lists what revokes a token, and a suspension is not among its reasons,
// so a token still unexpired is taken again after the unsuspension (also
// the simulator's choice).
func (s *Sim) suspendedToken(tok string) bool {
	m, ok := s.installations[tok]
	in := s.apps[m.installation]
	return ok && in != nil && !in.suspended.IsZero()
}

// suspendedReply is the simulator's answer to a request made with a
// suspended installation's token (suspendedToken): 403, with GitHub's
// message for the mint it refuses and the suspension's page.
func suspendedReply() reply {
	return jsonReply(http.StatusForbidden, githubError{
		Message:          "This installation has been suspended",
		DocumentationURL: "https://docs.github.com/apps/maintaining-github-apps/suspending-a-github-app-installation",
	})
}

// RefuseMints makes a token mint for installation id refused 403 while
// refuse is true, the installation not suspended: GitHub's "Create an
// installation access token for an app" documents a 403 Forbidden
// (https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app)
// that is not only a suspension's. An organization's IP allow list
// applies to the mint itself ("Installation access token creation
// requests now respect IP allow list settings",
// https://github.blog/changelog/2021-06-07-installation-access-token-creation-requests-now-respect-ip-allow-list-settings;
// "Managing allowed IP addresses for a GitHub App",
// https://docs.github.com/apps/maintaining-github-apps/managing-allowed-ip-addresses-for-a-github-app),
// so an App whose address the list leaves out is refused while the
// installation is there. The installation answers as before (no
// suspended_at), stays listed and covers its repositories; no webhook is
// sent, as GitHub sends none for it. false mints again. An unknown id is
// ErrNotFound.
func (s *Sim) RefuseMints(id int64, refuse bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.apps[id]
	if in == nil {
		return fmt.Errorf("%w: installation %d", ErrNotFound, id)
	}
	in.refuseMints = refuse
	return nil
}

// mintForbidden is the simulator's answer to a mint RefuseMints refuses:
// 403, with a message of its own (GitHub's documentation gives none).
func mintForbidden() reply {
	return jsonReply(http.StatusForbidden, githubError{
		Message:          "forgesim: the installation's token mints are refused (the organization's IP allow list does not permit this address)",
		DocumentationURL: "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app",
	})
}

// AddInstallationRepos adds repos ("owner/name", created if missing) to
// installation id, moving any another installation covered, and sends an
// installation_repositories "added" webhook. An unknown id is ErrNotFound;
// a malformed name is refused, naming the field.
func (s *Sim) AddInstallationRepos(id int64, repos ...string) error {
	return s.changeRepos(id, repos, nil)
}

// RemoveInstallationRepos takes repos off installation id and sends an
// installation_repositories "removed" webhook; repositories it did not
// cover are ignored. An unknown id is ErrNotFound.
func (s *Sim) RemoveInstallationRepos(id int64, repos ...string) error {
	return s.changeRepos(id, nil, repos)
}

func (s *Sim) changeRepos(id int64, add, remove []string) error {
	if len(add)+len(remove) == 0 {
		return badField("repositories", "", "name at least one")
	}
	for _, full := range append(slices.Clone(add), remove...) {
		if _, _, err := checkRepoName("repositories", full); err != nil {
			return err
		}
	}
	s.mu.Lock()
	in := s.apps[id]
	if in == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: installation %d", ErrNotFound, id)
	}
	added := s.coverLocked(in, add)
	var removed []string
	for _, full := range remove {
		k := strings.ToLower(full)
		if name, ok := in.repos[k]; ok {
			removed = append(removed, name)
			delete(in.repos, k)
			delete(s.repoInstall, k)
		}
	}
	action := "added"
	if len(add) == 0 {
		action = "removed"
	}
	d := s.delivery("installation_repositories", object{
		"action": action, "installation": s.installationJSON(nil, in), "repository_selection": "selected",
		"repositories_added": added, "repositories_removed": s.repoRefs(removed), "requester": nil,
	})
	s.mu.Unlock()
	s.deliver(d)
	return nil
}

// coverLocked makes in cover repos, creating them and moving them off any
// other installation, and returns their webhook references; s.mu is held.
func (s *Sim) coverLocked(in *simInstallation, repos []string) []object {
	var names []string
	for _, full := range repos {
		owner, name, _ := checkRepoName("repositories", full)
		rp := s.repoFor(owner, name, true)
		k := strings.ToLower(full)
		if prev := s.apps[s.repoInstall[k]]; prev != nil && prev != in {
			delete(prev.repos, k)
		}
		in.repos[k] = rp.owner + "/" + rp.name
		s.repoInstall[k] = in.id
		names = append(names, in.repos[k])
	}
	return s.repoRefs(names)
}

// repoRefs are the short repository objects installation webhooks list.
func (s *Sim) repoRefs(names []string) []object {
	slices.Sort(names)
	out := []object{}
	for _, full := range names {
		id := int64(0)
		if rp := s.repos[strings.ToLower(full)]; rp != nil {
			id = rp.id
		}
		_, name, _ := strings.Cut(full, "/")
		out = append(out, object{"id": id, "node_id": nodeID("R", id), "name": name, "full_name": full, "private": false})
	}
	return out
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// Installations lists the App's installations, by ID.
func (s *Sim) Installations() []Installation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Installation, 0, len(s.apps))
	for _, in := range s.sortedInstallations() {
		repos := append([]string{}, slices.Sorted(mapValues(in.repos))...)
		out = append(out, Installation{ID: in.id, Account: in.account, Repositories: repos})
	}
	return out
}

func (s *Sim) sortedInstallations() []*simInstallation {
	list := slices.Collect(mapValues(s.apps))
	slices.SortFunc(list, func(a, b *simInstallation) int { return cmp.Compare(a.id, b.id) })
	return list
}

// SeedInstallations adds installations 1..n, installation i on account
// org-<i> covering repos org-<i>/repo-1 … org-<i>/repo-<perInstallation>:
// what forge-sim --installations n --repos-per-installation r starts with.
func (s *Sim) SeedInstallations(n, perInstallation int) error {
	if n < 0 {
		return badField("installations", strconv.Itoa(n), "must be >= 0")
	}
	if perInstallation < 0 {
		return badField("repos_per_installation", strconv.Itoa(perInstallation), "must be >= 0")
	}
	for i := 1; i <= n; i++ {
		account := "org-" + strconv.Itoa(i)
		repos := make([]string, perInstallation)
		for j := range repos {
			repos[j] = account + "/repo-" + strconv.Itoa(j+1)
		}
		if err := s.AddInstallation(int64(i), account, repos...); err != nil {
			return err
		}
	}
	return nil
}

// installationJSON is GitHub's installation for in (the schema
// "installation": https://docs.github.com/rest/apps/apps#list-installations-for-the-authenticated-app);
// r nil: for a webhook, with GitHub's API root; s.mu is held.
func (s *Sim) installationJSON(r *http.Request, in *simInstallation) object {
	if r == nil {
		r = githubAPI
	}
	root := apiRoot(r)
	id := strconv.FormatInt(in.id, 10)
	created := ghTime(in.created)
	account := userJSON(r, in.account)
	account["type"] = "Organization"
	// GitHub's description of List installations for the authenticated
	// app gives the account as allOf simple-user and enterprise (Get a
	// repository installation's, as anyOf them), so an answer valid
	// against both carries the enterprise's required fields too.
	account["name"], account["slug"] = in.account, strings.ToLower(in.account)
	account["created_at"], account["updated_at"] = created, created
	var suspendedBy any // GitHub's nullable-simple-user
	if !in.suspended.IsZero() {
		suspendedBy = userJSON(r, in.suspendedBy)
	}
	return object{
		"id": in.id, "account": account, "repository_selection": "selected",
		"access_tokens_url": root + "/app/installations/" + id + "/access_tokens",
		"repositories_url":  root + "/installation/repositories",
		"html_url":          htmlRoot + "organizations/" + in.account + "/settings/installations/" + id,
		"app_id":            s.appID(), "app_slug": "iterion-sim", "target_id": account["id"], "target_type": "Organization",
		"permissions": object{"pull_requests": "read", "statuses": "write", "issues": "read", "metadata": "read"},
		"events":      []string{"pull_request", "status"},
		"created_at":  created, "updated_at": created, "single_file_name": nil,
		"has_multiple_single_files": false, "single_file_paths": []string{},
		"suspended_by": suspendedBy, "suspended_at": optTime(in.suspended),
	}
}

// appID is the App the simulator's installations belong to; s.mu is held.
func (s *Sim) appID() int64 { return cmp.Or(s.hook.AppID, 1) }

// listInstallations is "List installations for the authenticated app"
// (https://docs.github.com/rest/apps/apps#list-installations-for-the-authenticated-app):
// an App JWT only, paginated with per_page and page and a Link header.
func (s *Sim) listInstallations(r *http.Request, tok string) reply {
	if !strings.HasPrefix(tok, "app:") {
		return errorReply(http.StatusUnauthorized, "A JSON web token could not be decoded")
	}
	list := s.sortedInstallations()
	page, rep := paginate(r, len(list))
	if rep.status != 0 {
		return rep
	}
	out := []object{}
	for _, in := range list[page.from:page.to] {
		out = append(out, s.installationJSON(r, in))
	}
	rep = jsonReply(http.StatusOK, out)
	rep.header = page.link(r)
	return rep
}

// getRepoInstallation is "Get a repository installation for the
// authenticated app"
// (https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app):
// an App JWT only; 404 when no installation covers the repository. Names
// match without regard to case.
func (s *Sim) getRepoInstallation(r *http.Request, tok string) reply {
	if !strings.HasPrefix(tok, "app:") {
		return errorReply(http.StatusUnauthorized, "A JSON web token could not be decoded")
	}
	in := s.apps[s.repoInstall[strings.ToLower(r.PathValue("owner")+"/"+r.PathValue("repo"))]]
	if in == nil {
		return notFound()
	}
	return jsonReply(http.StatusOK, s.installationJSON(r, in))
}

// listInstallationRepos is "List repositories accessible to the app
// installation"
// (https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation):
// an installation token only, whose installation's repositories it
// lists, sorted by name, as {"total_count", "repositories"}, paginated
// with per_page and page and a Link header; any other token is 403 (the
// simulator does not model GitHub's message for it). s.mu is held.
func (s *Sim) listInstallationRepos(r *http.Request, tok string) reply {
	m, ok := s.installations[tok]
	in := s.apps[m.installation]
	if !ok || in == nil {
		return errorReply(http.StatusForbidden, "an installation access token is required")
	}
	names := slices.Sorted(mapValues(in.repos))
	page, rep := paginate(r, len(names))
	if rep.status != 0 {
		return rep
	}
	out := []object{}
	for _, full := range names[page.from:page.to] {
		owner, name, _ := strings.Cut(full, "/")
		out = append(out, s.repoJSON(r, s.repoFor(owner, name, true)))
	}
	rep = jsonReply(http.StatusOK, object{"total_count": len(names), "repositories": out})
	rep.header = page.link(r)
	return rep
}

// getInstallation is "Get an installation for the authenticated app"
// (https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app):
// an App JWT only; the installation, or 404 for an id that is not one of
// the App's (never added, or removed since).
func (s *Sim) getInstallation(r *http.Request, tok string) reply {
	if !strings.HasPrefix(tok, "app:") {
		return errorReply(http.StatusUnauthorized, "A JSON web token could not be decoded")
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	in := s.apps[id]
	if err != nil || in == nil {
		return notFound()
	}
	return jsonReply(http.StatusOK, s.installationJSON(r, in))
}

// reaches tells whether tok may reach the repository r names, if any; s.mu
// is held (see reachesRepo).
func (s *Sim) reaches(tok string, r *http.Request) bool {
	owner := r.PathValue("owner")
	return owner == "" || s.reachesRepo(tok, owner, r.PathValue("repo"))
}

// reachesRepo tells whether tok may reach repository owner/name; s.mu is
// held. Once the App has installations, a token minted for one reaches
// only the repositories it covers, over REST and GraphQL alike (an
// installation reaches its account's resources only where the App was
// granted access to the repository: "Authenticating as a GitHub App
// installation",
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/authenticating-as-a-github-app-installation); another repository is answered as GitHub
// answers a private repository a token cannot see: REST 404, charged
// ("Troubleshooting the REST API", 404 Not Found for an existing resource:
// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#404-not-found-for-an-existing-resource),
// GraphQL a NOT_FOUND error "Could not resolve to a Repository". Other
// tokens are not restricted.
func (s *Sim) reachesRepo(tok, owner, name string) bool {
	m, minted := s.installations[tok]
	if !minted || len(s.apps) == 0 {
		return true
	}
	return s.repoInstall[strings.ToLower(owner+"/"+name)] == m.installation
}

// mintable tells whether a token may be minted for installation id; s.mu
// is held. See the comment at the top of this file.
func (s *Sim) mintable(id int64) bool {
	if s.apps[id] != nil {
		return true
	}
	return len(s.apps) == 0 && !s.removedApps[id]
}

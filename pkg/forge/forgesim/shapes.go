package forgesim

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
)

// GitHub's JSON shapes, with every field GitHub's OpenAPI description marks
// required (https://github.com/github/rest-api-description; the schemas
// simple-user, repository, pull-request, issue, status, simple-commit-status
// and combined-commit-status), checked by the contract test in
// internal/testing/githubcontract. Fields the simulator has no state for
// carry GitHub's value for a fresh repository: zero counts, no milestone,
// no license. Bodies are maps: the keys are GitHub's, and encoding/json
// writes them in one order, so an answer's ETag is stable.

// object is one JSON object of an answer.
type object = map[string]any

// defaultBranch is every simulated repository's default branch.
const defaultBranch = "main"

// nodeID is a GraphQL global node ID of kind (GitHub's prefixes: U_, R_,
// PR_, I_, SC_) for id. GitHub's are opaque; these are stable and unique.
func nodeID(kind string, id int64) string {
	return kind + "_" + base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "sim:%d", id))
}

// userID is a user's or organization's database ID, stable for its login
// in any case (logins are not case sensitive on GitHub).
func userID(login string) int64 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(login)))
	return int64(h.Sum32()&0x7fffffff) + 1
}

// commitSHA is a commit SHA the simulator makes up for seed: 40 hex digits,
// stable for the seed.
func commitSHA(seed string) string {
	sum := sha1.Sum([]byte("forgesim commit " + seed))
	return hex.EncodeToString(sum[:])
}

// userJSON is GitHub's simple-user for login.
func userJSON(r *http.Request, login string) object {
	api := apiRoot(r) + "/users/" + login
	id := userID(login)
	return object{
		"login": login, "id": id, "node_id": nodeID("U", id),
		"avatar_url":  fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id),
		"gravatar_id": "", "url": api, "html_url": htmlRoot + login,
		"followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
		"gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
		"subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs",
		"repos_url": api + "/repos", "events_url": api + "/events{/privacy}",
		"received_events_url": api + "/received_events", "type": "User", "site_admin": false,
		"user_view_type": "public",
	}
}

// repoJSON is GitHub's repository (a superset of minimal-repository) for rp.
func (s *Sim) repoJSON(r *http.Request, rp *repo) object {
	full := rp.owner + "/" + rp.name
	api := apiRoot(r) + "/repos/" + full
	html := htmlRoot + full
	host := strings.TrimSuffix(strings.TrimPrefix(htmlRoot, "https://"), "/")
	openIssues := 0
	for _, is := range rp.issues {
		if is.state == "open" {
			openIssues++
		}
	}
	created := ghTime(rp.created)
	return object{
		"id": rp.id, "node_id": nodeID("R", rp.id), "name": rp.name, "full_name": full,
		"owner": userJSON(r, rp.owner), "private": false, "html_url": html, "description": nil,
		"fork": false, "url": api,
		"archive_url": api + "/{archive_format}{/ref}", "assignees_url": api + "/assignees{/user}",
		"blobs_url": api + "/git/blobs{/sha}", "branches_url": api + "/branches{/branch}",
		"collaborators_url": api + "/collaborators{/collaborator}", "comments_url": api + "/comments{/number}",
		"commits_url": api + "/commits{/sha}", "compare_url": api + "/compare/{base}...{head}",
		"contents_url": api + "/contents/{+path}", "contributors_url": api + "/contributors",
		"deployments_url": api + "/deployments", "downloads_url": api + "/downloads",
		"events_url": api + "/events", "forks_url": api + "/forks",
		"git_commits_url": api + "/git/commits{/sha}", "git_refs_url": api + "/git/refs{/sha}",
		"git_tags_url": api + "/git/tags{/sha}", "git_url": "git://" + host + "/" + full + ".git",
		"hooks_url": api + "/hooks", "issue_comment_url": api + "/issues/comments{/number}",
		"issue_events_url": api + "/issues/events{/number}", "issues_url": api + "/issues{/number}",
		"keys_url": api + "/keys{/key_id}", "labels_url": api + "/labels{/name}",
		"languages_url": api + "/languages", "merges_url": api + "/merges",
		"milestones_url": api + "/milestones{/number}", "notifications_url": api + "/notifications{?since,all,participating}",
		"pulls_url": api + "/pulls{/number}", "releases_url": api + "/releases{/id}",
		"ssh_url": "git@" + host + ":" + full + ".git", "stargazers_url": api + "/stargazers",
		"statuses_url": api + "/statuses/{sha}", "subscribers_url": api + "/subscribers",
		"subscription_url": api + "/subscription", "tags_url": api + "/tags",
		"teams_url": api + "/teams", "trees_url": api + "/git/trees{/sha}",
		"clone_url": html + ".git", "mirror_url": nil, "svn_url": html, "homepage": nil, "language": nil,
		"forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0, "watchers_count": 0,
		"size": 0, "default_branch": defaultBranch, "open_issues": openIssues, "open_issues_count": openIssues,
		"is_template": false, "topics": []string{}, "has_issues": true, "has_projects": true,
		"has_wiki": true, "has_pages": false, "has_downloads": true, "has_discussions": false,
		"archived": false, "disabled": false, "visibility": "public", "license": nil,
		"pushed_at": created, "created_at": created, "updated_at": created,
	}
}

// labelJSON is GitHub's label name of rp.
func labelJSON(r *http.Request, rp *repo, name string) object {
	id := userID(rp.owner + "/" + rp.name + ":" + name)
	return object{
		"id": id, "node_id": nodeID("LA", id), "name": name, "description": nil, "color": "ededed", "default": false,
		"url": fmt.Sprintf("%s/repos/%s/%s/labels/%s", apiRoot(r), rp.owner, rp.name, name),
	}
}

// baseSHA is the head of rp's default branch: its ref when one was set
// (SetRef heads/main), else the repository's first commit.
func (rp *repo) baseSHA() string {
	if sha, ok := rp.refs["heads/"+defaultBranch]; ok {
		return sha
	}
	return commitSHA(strings.ToLower(rp.owner+"/"+rp.name) + " initial")
}

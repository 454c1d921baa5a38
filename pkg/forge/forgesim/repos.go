package forgesim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrBadRequest is wrapped by errors about a bad argument or control body;
// the error names the field.
var ErrBadRequest = errors.New("forgesim: bad request")

// ErrNotFound is wrapped when a control call names a repository, pull
// request, issue or installation the simulator does not have.
var ErrNotFound = errors.New("forgesim: not found")

// ErrStatusLimit is returned when a commit already has MaxStatuses
// statuses of a context. Its text is GitHub's message, which the statuses
// endpoint answers with its 422.
var ErrStatusLimit = errors.New("This SHA and context has reached the maximum number of statuses.")

// MaxStatuses is how many statuses one commit may have of one context:
// "there is a limit of 1000 statuses per sha and context within a
// repository. Attempts to create more than 1000 statuses will result in a
// validation error" (Create a commit status:
// https://docs.github.com/rest/commits/statuses#create-a-commit-status).
// Contexts compare case-insensitively, as the endpoint's do.
const MaxStatuses = 1000

// FieldError is a bad argument: Field names it as the control endpoint's
// JSON does.
type FieldError struct {
	Field, Value, Problem string
}

// Error names the field, its value and what is wrong with it.
func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("forgesim: bad request: %s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("forgesim: bad request: %s %q: %s", e.Field, e.Value, e.Problem)
}

// Unwrap returns ErrBadRequest.
func (e *FieldError) Unwrap() error { return ErrBadRequest }

func badField(field, value, problem string) error {
	return &FieldError{Field: field, Value: value, Problem: problem}
}

// Status is a commit status to set with SetStatus.
type Status struct {
	Context     string `json:"context"`
	State       string `json:"state"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// Issue is an issue to seed with SeedIssue. Assignees are user logins.
type Issue struct {
	Number    int      `json:"number"`
	Title     string   `json:"title"`
	State     string   `json:"state"`
	Labels    []string `json:"labels"`
	Assignees []string `json:"assignees"`
}

type repo struct {
	id          int64
	owner, name string
	created     time.Time
	issues      map[int]*issue       // pull requests included, as on GitHub
	commits     map[string]bool      // every head SHA ever pushed
	refs        map[string]string    // "heads/<branch>" or "tags/<tag>" → SHA
	statuses    map[string][]*status // by SHA, oldest first
	gone        map[int]gone         // issues deleted or transferred away, by number
}

type issue struct {
	id               int64
	number           int
	title, state     string
	labels           []string
	assignees        []string // logins
	created, updated time.Time
	closed           time.Time // zero: open
	pull             *pull     // nil: a plain issue
}

type pull struct {
	headSHA string
	merged  time.Time // zero: not merged
}

type status struct {
	id                                     int64
	context, state, description, targetURL string
	created                                time.Time
}

// repoFor returns owner/repo, creating it when create is set; s.mu is held.
// Names match without regard to case, as on GitHub ("The name is not case
// sensitive", the owner and repo parameters of every repository operation,
// e.g. https://docs.github.com/rest/pulls/pulls#get-a-pull-request); a
// repository keeps the spelling it was created with, which its answers
// show.
func (s *Sim) repoFor(owner, name string, create bool) *repo {
	key := strings.ToLower(owner + "/" + name)
	r := s.repos[key]
	if r == nil && create {
		r = &repo{id: s.newID(), owner: owner, name: name, created: s.clock(), issues: make(map[int]*issue), commits: make(map[string]bool), refs: make(map[string]string), statuses: make(map[string][]*status), gone: make(map[int]gone)}
		r.commits[r.baseSHA()] = true
		s.repos[key] = r
	}
	return r
}

func (s *Sim) newID() int64 {
	s.nextID++
	return s.nextID
}

func checkOwnerRepo(owner, repo string) error {
	if owner == "" {
		return badField("owner", owner, "required")
	}
	if repo == "" {
		return badField("repo", repo, "required")
	}
	return nil
}

func checkState(field, state string) error {
	if state != "open" && state != "closed" {
		return badField(field, state, `want "open" or "closed"`)
	}
	return nil
}

// SeedPull creates pull request number of owner/repo (and the repository),
// or replaces its head and state: state is "open" or "closed" (unmerged).
func (s *Sim) SeedPull(owner, repo string, number int, headSHA, state string) error {
	if err := checkOwnerRepo(owner, repo); err != nil {
		return err
	}
	if number <= 0 {
		return badField("number", strconv.Itoa(number), "must be positive")
	}
	if headSHA == "" {
		return badField("head_sha", headSHA, "required")
	}
	if err := checkState("state", state); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	r := s.repoFor(owner, repo, true)
	is := r.issues[number]
	if is != nil && is.pull == nil {
		return badField("number", strconv.Itoa(number), "is an issue, not a pull request")
	}
	if is == nil {
		is = &issue{id: s.newID(), number: number, title: fmt.Sprintf("Pull request %d", number), created: now, pull: &pull{}}
		r.issues[number] = is
	}
	is.pull.headSHA, is.pull.merged = headSHA, time.Time{}
	setState(is, state, now)
	r.commits[headSHA] = true
	return nil
}

func setState(is *issue, state string, now time.Time) {
	if state != is.state {
		is.closed = time.Time{}
		if state == "closed" {
			is.closed = now
		}
	}
	is.state, is.updated = state, now
}

// openPull returns pull request number of owner/repo; s.mu is held.
func (s *Sim) pullFor(owner, repo string, number int) (*repo, *issue, error) {
	r := s.repoFor(owner, repo, false)
	if r == nil || r.issues[number] == nil || r.issues[number].pull == nil {
		return nil, nil, fmt.Errorf("%w: pull request %s/%s#%d", ErrNotFound, owner, repo, number)
	}
	return r, r.issues[number], nil
}

// PushHead moves pull request number's head to sha, as a push does.
func (s *Sim) PushHead(owner, repo string, number int, sha string) error {
	if sha == "" {
		return badField("head_sha", sha, "required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, is, err := s.pullFor(owner, repo, number)
	if err != nil {
		return err
	}
	is.pull.headSHA, is.updated = sha, s.clock()
	r.commits[sha] = true
	return nil
}

// Close closes pull request number without merging it.
func (s *Sim) Close(owner, repo string, number int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, is, err := s.pullFor(owner, repo, number)
	if err != nil {
		return err
	}
	setState(is, "closed", s.clock())
	return nil
}

// Merge merges and closes pull request number.
func (s *Sim) Merge(owner, repo string, number int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, is, err := s.pullFor(owner, repo, number)
	if err != nil {
		return err
	}
	now := s.clock()
	setState(is, "closed", now)
	is.pull.merged = now
	return nil
}

// SetStatus adds st to commit sha of owner/repo (creating both), as the
// statuses endpoint does, without spending any budget. st.State is error,
// failure, pending or success; an empty Context is "default". Past
// MaxStatuses of one context it returns ErrStatusLimit.
func (s *Sim) SetStatus(owner, repo, sha string, st Status) error {
	if err := checkOwnerRepo(owner, repo); err != nil {
		return err
	}
	if sha == "" {
		return badField("sha", sha, "required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoFor(owner, repo, true)
	r.commits[sha] = true
	_, err := s.addStatus(r, sha, st)
	return err
}

// addStatus validates and records st; s.mu is held.
func (s *Sim) addStatus(r *repo, sha string, st Status) (*status, error) {
	if !slices.Contains([]string{"error", "failure", "pending", "success"}, st.State) {
		return nil, badField("state", st.State, "want error, failure, pending or success")
	}
	if st.Context == "" {
		st.Context = "default"
	}
	n := 0
	for _, old := range r.statuses[sha] {
		if strings.EqualFold(old.context, st.Context) {
			n++
		}
	}
	if n >= MaxStatuses {
		return nil, ErrStatusLimit
	}
	rec := &status{id: s.newID(), context: st.Context, state: st.State, description: st.Description, targetURL: st.TargetURL, created: s.clock()}
	r.statuses[sha] = append(r.statuses[sha], rec)
	return rec, nil
}

// SetRef points ref of owner/repo (creating both) at commit sha: ref is
// "heads/<branch>" or "tags/<tag>", as GitHub's git refs name them. The
// combined status endpoint then accepts the branch or tag name for the SHA.
func (s *Sim) SetRef(owner, repo, ref, sha string) error {
	if err := checkOwnerRepo(owner, repo); err != nil {
		return err
	}
	kind, name, _ := strings.Cut(ref, "/")
	if (kind != "heads" && kind != "tags") || name == "" {
		return badField("ref", ref, `want "heads/<branch>" or "tags/<tag>"`)
	}
	if sha == "" {
		return badField("sha", sha, "required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoFor(owner, repo, true)
	r.refs[ref] = sha
	r.commits[sha] = true
	return nil
}

// resolve names the commit ref means: a commit SHA, else a branch, else a
// tag, as the combined status endpoint reads its {ref} ("The ref can be a
// SHA, a branch name, or a tag name", Get the combined status for a
// specific reference:
// https://docs.github.com/rest/commits/statuses#get-the-combined-status-for-a-specific-reference).
func (r *repo) resolve(ref string) (string, bool) {
	if r.commits[ref] {
		return ref, true
	}
	for _, kind := range []string{"heads/", "tags/"} {
		if sha, ok := r.refs[kind+ref]; ok {
			return sha, true
		}
	}
	return "", false
}

// SeedIssue creates or replaces issue is.Number of owner/repo (not a pull
// request); is.State is "open" or "closed".
func (s *Sim) SeedIssue(owner, repo string, is Issue) error {
	if err := checkOwnerRepo(owner, repo); err != nil {
		return err
	}
	if is.Number <= 0 {
		return badField("number", strconv.Itoa(is.Number), "must be positive")
	}
	if is.Title == "" {
		return badField("title", is.Title, "required")
	}
	if err := checkState("state", is.State); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	r := s.repoFor(owner, repo, true)
	cur := r.issues[is.Number]
	if cur != nil && cur.pull != nil {
		return badField("number", strconv.Itoa(is.Number), "is a pull request, not an issue")
	}
	if cur == nil {
		cur = &issue{id: s.newID(), number: is.Number, created: now}
		r.issues[is.Number] = cur
	}
	cur.title, cur.labels, cur.assignees = is.Title, slices.Clone(is.Labels), slices.Clone(is.Assignees)
	setState(cur, is.State, now)
	return nil
}

// gone is an issue no longer in its repository: deleted (to nil), or
// transferred to number of repository to.
type gone struct {
	to     *repo
	number int
}

// DeleteIssue deletes issue number of owner/repo (an issue, not a pull
// request, as on GitHub): it leaves the list, and its GET answers 410
// Gone, as GitHub answers a reader with access to the repository
// (https://docs.github.com/rest/issues/issues#get-an-issue). A missing
// issue is ErrNotFound.
func (s *Sim) DeleteIssue(owner, repo string, number int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, err := s.plainIssue(owner, repo, number)
	if err != nil {
		return err
	}
	delete(r.issues, number)
	r.gone[number] = gone{}
	return nil
}

// TransferIssue moves issue number of owner/repo to toOwner/toRepo
// (created if need be) under the next number there, and returns it: it
// leaves the first repository's list, and its GET there answers 301 Moved
// Permanently, as GitHub answers for a transferred issue
// (https://docs.github.com/rest/issues/issues#get-an-issue), with Location
// the issue's address in its new repository. A missing issue is
// ErrNotFound.
func (s *Sim) TransferIssue(owner, repo string, number int, toOwner, toRepo string) (int, error) {
	if err := checkOwnerRepo(toOwner, toRepo); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, is, err := s.plainIssue(owner, repo, number)
	if err != nil {
		return 0, err
	}
	to := s.repoFor(toOwner, toRepo, true)
	if to == r {
		return 0, badField("repository", toOwner+"/"+toRepo, "is the issue's own")
	}
	next := 1
	for n := range to.issues {
		next = max(next, n+1)
	}
	for n := range to.gone {
		next = max(next, n+1)
	}
	delete(r.issues, number)
	r.gone[number] = gone{to: to, number: next}
	is.number, is.updated = next, s.clock()
	to.issues[next] = is
	return next, nil
}

// plainIssue returns issue number of owner/repo, which must not be a pull
// request; s.mu is held.
func (s *Sim) plainIssue(owner, repo string, number int) (*repo, *issue, error) {
	r := s.repoFor(owner, repo, false)
	if r == nil || r.issues[number] == nil || r.issues[number].pull != nil {
		return nil, nil, fmt.Errorf("%w: issue %s/%s#%d", ErrNotFound, owner, repo, number)
	}
	return r, r.issues[number], nil
}

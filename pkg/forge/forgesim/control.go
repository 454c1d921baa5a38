package forgesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"iterion.dev/iterion/internal/httpjson"
)

// The /_sim/ control endpoints: each decodes its body strictly and calls
// its in-process twin.

// decode reads a JSON object into v, refusing unknown fields and trailing
// data; the error names the field, or "body" when the body is no JSON
// object. An empty body is an empty object.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil && !httpjson.AtEnd(dec) {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field == "":
		// The body itself is no object (a number, an array, a string).
		return badField("body", "", "got a JSON "+typeErr.Value+", want a JSON object")
	case errors.As(err, &typeErr):
		return badField(typeErr.Field, "", "got a JSON "+typeErr.Value+", want "+typeErr.Type.String())
	}
	if field, ok := httpjson.UnknownField(err); ok {
		if field == "" {
			return badField("body", "", `unknown field "" (an empty key)`)
		}
		return badField(field, "", "unknown field")
	}
	return badField("body", "", err.Error())
}

// ctlReply answers err: 400 naming the field, 404, 422 past a commit's
// statuses, or 204 when nil.
func ctlReply(err error) reply {
	var fe *FieldError
	switch {
	case err == nil:
		return reply{status: http.StatusNoContent}
	case errors.As(err, &fe):
		return jsonReply(http.StatusBadRequest, githubError{Message: err.Error(), Field: fe.Field})
	case errors.Is(err, ErrNotFound):
		return jsonReply(http.StatusNotFound, githubError{Message: err.Error()})
	case errors.Is(err, ErrStatusLimit):
		return validationFailed(err.Error())
	default:
		return jsonReply(http.StatusInternalServerError, githubError{Message: err.Error()})
	}
}

func (s *Sim) ctlSeedPull(r *http.Request) reply {
	var body struct {
		Number  int    `json:"number"`
		HeadSHA string `json:"head_sha"`
		State   string `json:"state"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	if body.State == "" {
		body.State = "open"
	}
	return ctlReply(s.SeedPull(r.PathValue("owner"), r.PathValue("repo"), body.Number, body.HeadSHA, body.State))
}

// pathNumber reads the {number} path segment.
func pathNumber(r *http.Request) (int, error) {
	v := r.PathValue("number")
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, badField("number", v, "want a positive integer")
	}
	return n, nil
}

func (s *Sim) ctlPushHead(r *http.Request) reply {
	var body struct {
		HeadSHA string `json:"head_sha"`
	}
	n, err := pathNumber(r)
	if err == nil {
		err = decode(r, &body)
	}
	if err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.PushHead(r.PathValue("owner"), r.PathValue("repo"), n, body.HeadSHA))
}

// ctlPull runs op (Close, Merge or DeleteIssue) on the pull request or
// issue in the path.
func (s *Sim) ctlPull(r *http.Request, op func(owner, repo string, number int) error) reply {
	n, err := pathNumber(r)
	if err != nil {
		return ctlReply(err)
	}
	return ctlReply(op(r.PathValue("owner"), r.PathValue("repo"), n))
}

func (s *Sim) ctlSetStatus(r *http.Request) reply {
	var st Status
	if err := decode(r, &st); err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.SetStatus(r.PathValue("owner"), r.PathValue("repo"), r.PathValue("sha"), st))
}

func (s *Sim) ctlSeedIssue(r *http.Request) reply {
	var is Issue
	if err := decode(r, &is); err != nil {
		return ctlReply(err)
	}
	if is.State == "" {
		is.State = "open"
	}
	return ctlReply(s.SeedIssue(r.PathValue("owner"), r.PathValue("repo"), is))
}

func (s *Sim) ctlBudget(r *http.Request) reply {
	var body struct {
		Limit *int   `json:"limit"`
		Token string `json:"token"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	if body.Limit == nil {
		return ctlReply(badField("limit", "", "required"))
	}
	return ctlReply(s.SetBudget(body.Token, *body.Limit))
}

func (s *Sim) ctlMapToken(r *http.Request) reply {
	var body struct {
		Token string `json:"token"`
		User  string `json:"user"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.MapToken(body.Token, body.User))
}

func (s *Sim) ctlSetRef(r *http.Request) reply {
	var body struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.SetRef(r.PathValue("owner"), r.PathValue("repo"), body.Ref, body.SHA))
}

func (s *Sim) ctlAdvance(r *http.Request) reply {
	var body struct {
		Duration string `json:"duration"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	d, err := time.ParseDuration(body.Duration)
	if err != nil {
		return ctlReply(badField("duration", body.Duration, `want a Go duration such as "1h"`))
	}
	return ctlReply(s.Advance(d))
}

func (s *Sim) ctlResetHour(*http.Request) reply {
	s.ResetHour()
	return ctlReply(nil)
}

func (s *Sim) ctlSecondary(r *http.Request) reply {
	var body struct {
		Token             string `json:"token"`
		RetryAfterSeconds int    `json:"retry_after_seconds"`
		Count             int    `json:"count"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	if body.Count == 0 {
		body.Count = 1
	}
	// Past this many seconds the product wraps, and a huge retry-after
	// would read as a small one.
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	if n := int64(body.RetryAfterSeconds); n < 0 || n > maxSeconds {
		return ctlReply(badField("retry_after_seconds", strconv.Itoa(body.RetryAfterSeconds), "must be 0 through "+strconv.FormatInt(maxSeconds, 10)))
	}
	return ctlReply(s.SecondaryLimit(body.Token, time.Duration(body.RetryAfterSeconds)*time.Second, body.Count))
}

func (s *Sim) ctlResetStats(*http.Request) reply {
	s.ResetStats()
	return ctlReply(nil)
}

// ctlRedirect answers 307 to /_sim/redirect/{hops-1}/{path}, or to /{path}
// at the last hop, keeping the query: hops redirects, then the target.
func (s *Sim) ctlRedirect(r *http.Request) reply {
	v := r.PathValue("hops")
	hops, err := strconv.Atoi(v)
	if err != nil || hops < 1 {
		return ctlReply(badField("hops", v, "want a positive integer"))
	}
	to := "/" + r.PathValue("path")
	if hops > 1 {
		to = fmt.Sprintf("/_sim/redirect/%d%s", hops-1, to)
	}
	if r.URL.RawQuery != "" {
		to += "?" + r.URL.RawQuery
	}
	return reply{status: http.StatusTemporaryRedirect, header: http.Header{"Location": {to}}}
}

func (s *Sim) ctlAddInstallation(r *http.Request) reply {
	var body struct {
		ID                   int64    `json:"id"`
		Account              string   `json:"account"`
		Repositories         []string `json:"repositories"`
		Installations        int      `json:"installations"`
		ReposPerInstallation int      `json:"repos_per_installation"`
	}
	if err := decode(r, &body); err != nil {
		return ctlReply(err)
	}
	if body.Installations != 0 || body.ReposPerInstallation != 0 {
		if body.ID != 0 || body.Account != "" || body.Repositories != nil {
			return ctlReply(badField("installations", strconv.Itoa(body.Installations), "seeds 1..n: give it without id, account and repositories"))
		}
		return ctlReply(s.SeedInstallations(body.Installations, body.ReposPerInstallation))
	}
	return ctlReply(s.AddInstallation(body.ID, body.Account, body.Repositories...))
}

// pathInstallation reads the {id} path segment.
func pathInstallation(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, badField("id", v, "want a positive integer")
	}
	return n, nil
}

// ctlInstallation runs op (RemoveInstallation, SuspendInstallation or
// UnsuspendInstallation) on the installation in the path.
func (s *Sim) ctlInstallation(r *http.Request, op func(id int64) error) reply {
	id, err := pathInstallation(r)
	if err != nil {
		return ctlReply(err)
	}
	return ctlReply(op(id))
}

// ctlRefuseMints is POST /_sim/installations/{id}/refuse-mints
// {"refuse":true|false} (RefuseMints); refuse is required.
func (s *Sim) ctlRefuseMints(r *http.Request) reply {
	var body struct {
		Refuse *bool `json:"refuse"`
	}
	id, err := pathInstallation(r)
	if err == nil {
		err = decode(r, &body)
	}
	if err == nil && body.Refuse == nil {
		err = badField("refuse", "", "required: true or false")
	}
	if err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.RefuseMints(id, *body.Refuse))
}

func (s *Sim) ctlInstallationRepos(r *http.Request) reply {
	var body struct {
		Add    []string `json:"add"`
		Remove []string `json:"remove"`
	}
	id, err := pathInstallation(r)
	if err == nil {
		err = decode(r, &body)
	}
	if err == nil && (len(body.Add) == 0) == (len(body.Remove) == 0) {
		err = badField("add", "", "give add or remove, not both nor neither")
	}
	if err != nil {
		return ctlReply(err)
	}
	if len(body.Add) > 0 {
		return ctlReply(s.AddInstallationRepos(id, body.Add...))
	}
	return ctlReply(s.RemoveInstallationRepos(id, body.Remove...))
}

func (s *Sim) ctlWebhook(r *http.Request) reply {
	var hook Webhook
	if err := decode(r, &hook); err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.SetWebhook(hook))
}

// ctlTransferIssue moves the issue in the path to the repository its body
// names (TransferIssue), and answers 200 with where it went:
// {"repository":"owner/name","number":N}.
func (s *Sim) ctlTransferIssue(r *http.Request) reply {
	var body struct {
		Repository string `json:"repository"`
	}
	n, err := pathNumber(r)
	if err == nil {
		err = decode(r, &body)
	}
	var owner, name string
	if err == nil {
		owner, name, err = checkRepoName("repository", body.Repository)
	}
	if err != nil {
		return ctlReply(err)
	}
	to, err := s.TransferIssue(r.PathValue("owner"), r.PathValue("repo"), n, owner, name)
	if err != nil {
		return ctlReply(err)
	}
	return jsonReply(http.StatusOK, map[string]any{"repository": owner + "/" + name, "number": to})
}

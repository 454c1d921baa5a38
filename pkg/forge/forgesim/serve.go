package forgesim

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds the request bodies the simulator reads.
const maxBody = 1 << 20

// reply is an answer before it is written: the pipelines add the budget
// headers, the ETag and the counts.
type reply struct {
	status int
	body   any // marshalled as JSON; nil: no body
	header http.Header
	// points is what the answer costs its budget when that is not one
	// request: a GraphQL query's points.
	points int
	// free: the answer costs nothing (a refusal, an invalid GraphQL query).
	free bool
	// reads are the pull requests the answer holds (clock_stats.go).
	reads []pullRef
}

func jsonReply(status int, body any) reply { return reply{status: status, body: body} }

// githubError is GitHub's error body.
type githubError struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url,omitempty"`
	Field            string `json:"field,omitempty"`
}

func errorReply(status int, msg string) reply {
	return jsonReply(status, githubError{Message: msg, DocumentationURL: "https://docs.github.com/rest"})
}

// api wraps a GitHub endpoint: it names the token and its principal,
// refuses a revoked or expired token, then enforces the concurrency limit, an
// injected secondary limit (used up only by a request that reaches it),
// the primary budget, the CPU-time limit and the per-minute secondary
// limits, in that order, gives a GraphQL refusal its configured shape, answers a matching
// If-None-Match with a 304, charges the budget, sets the x-ratelimit-*
// headers, counts the request, and holds the answer for its modelled time
// (timing.go) before writing it.
func (s *Sim) api(h func(*http.Request, string) reply) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := tokenOf(r)
		res := "core"
		if isGraphQL(r) {
			res = "graphql"
		}
		s.mu.Lock()
		principal := s.principalOf(tok)
		if tok == "" {
			principal = clientPrincipal(r)
		}
		admitted := s.enter(principal)
		s.mu.Unlock()
		if admitted {
			defer func() {
				s.mu.Lock()
				s.leave(principal)
				s.mu.Unlock()
			}()
		}
		// Read the body before taking the lock, so a slow client stalls
		// only its own request (and counts as in flight meanwhile).
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			s.mu.Lock()
			s.count(r, tok, http.StatusBadRequest, 0, 0)
			s.mu.Unlock()
			write(w, http.StatusBadRequest, nil)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		now := s.clock()
		win := s.window(principal, res, now)
		limit := s.limitOf(principal, res)
		var rep reply
		var took time.Duration // the answer's modelled time
		refused := true        // by a limit: nothing charged
		cpuRefusal, cpuOK := s.admitCPU(principal, res, now)
		kind := "" // the limit that refused it (clock_stats.go)
		switch {
		case res == "graphql" && tok == "":
			// "To communicate with the GraphQL server, you'll need an OAuth
			// token with the right scopes" ("Forming calls with GraphQL",
			// Authenticating with GraphQL:
			// https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql;
			// the page now lists the tokens that do: a personal access
			// token, a GitHub App's or an OAuth app's). GitHub answers 401
			// with this message and that page.
			rep = jsonReply(http.StatusUnauthorized, githubError{
				Message:          "This endpoint requires you to be authenticated.",
				DocumentationURL: "https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql",
			})
		case s.unusable(tok, now):
			rep = errorReply(http.StatusUnauthorized, "Bad credentials")
		case s.jwtTimes && strings.HasPrefix(tok, "app:") && jwtTimeRefusal(r, now) != "":
			rep = errorReply(http.StatusUnauthorized, jwtTimeRefusal(r, now))
		case s.suspendedToken(tok):
			rep = suspendedReply()
		case !admitted:
			// In-flight requests end within seconds; no window to wait for.
			rep, kind = secondaryReply(http.StatusTooManyRequests, time.Second), RefusedConcurrency
		case s.injected(tok): // taken only by a request that gets this far
			rep, kind = secondaryReply(http.StatusForbidden, s.takeSecondary(tok)), RefusedInjected
		case res == "core" && win.used >= limit: // GraphQL's refusal is graphql's own
			kind = RefusedPrimary
			msg := "API rate limit exceeded for " + tokenLabel(tok) + "."
			if tok == "" {
				// GitHub names an unauthenticated caller by the address
				// its limit is kept for, "API rate limit exceeded for
				// xxx.xxx.xxx.xxx." ("Resources in the REST API",
				// Exceeding the rate limit:
				// https://docs.github.com/rest/overview/resources-in-the-rest-api#exceeding-the-rate-limit),
				// and its hint is for such callers: "If you want a
				// higher primary rate limit, consider making
				// authenticated requests instead of unauthenticated
				// requests" ("Rate limits for the REST API", Getting a
				// higher rate limit:
				// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#getting-a-higher-rate-limit).
				msg = "API rate limit exceeded for " + strings.TrimPrefix(principal, clientPrefix) + "." +
					" (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
			}
			rep = jsonReply(http.StatusForbidden, githubError{
				Message:          msg,
				DocumentationURL: "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting",
			})
		case !cpuOK:
			rep, kind = cpuRefusal, RefusedCPU
		default:
			var ok bool
			points := 0 // the secondary-limit points chargeGraphQL took
			if res == "graphql" {
				points = graphqlPoints(body)
				rep, ok = s.chargeGraphQL(principal, points, now)
				kind = RefusedPoints
			} else {
				rep, kind, ok = s.chargeREST(principal, r.Method, r.Pattern, now)
			}
			if ok {
				refused, kind = false, ""
				ans := notFound()
				if s.reaches(tok, r) {
					ans = h(r, tok)
				}
				rep, took = s.answerTime(r, principal, res, body, ans, now)
				if res == "graphql" {
					rep = s.injectFault(rep)
				}
				if isPrimaryRefusal(rep) {
					kind = RefusedPrimary
					s.refundGraphQL(principal, points)
				}
			}
		}
		if kind != "" {
			s.countRefusal(principal, res, kind)
		}
		if res == "graphql" {
			// A 401 is no limit's refusal (kind ""): it keeps its shape.
			rep = s.shapeGraphQLLimit(refused && kind != "", rep)
		}
		out, etag := encode(rep, tok)
		status := rep.status
		notModified := status == http.StatusOK && r.Method == http.MethodGet && etagMatches(r.Header.Get("If-None-Match"), etag)
		if notModified {
			status, out = http.StatusNotModified, nil
		}
		// "Making a conditional request does not count against your
		// primary rate limit if a 304 response is returned and the request
		// was made while correctly authorized with an Authorization
		// header" (Best practices for using the REST API, Use conditional
		// requests if appropriate:
		// https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate).
		// An ETag names one token's answer (see encode), so another
		// token's ETag never matches: that request gets a 200, charged.
		units := 0
		if !refused && (!notModified || tok == "") && !rep.free {
			units = max(rep.points, 1)
		}
		win.used += units
		hd := w.Header()
		for k, v := range rep.header {
			hd[k] = v
		}
		left := max(limit-win.used, 0)
		if kind == RefusedPrimary {
			// A GraphQL query the budget cannot pay may leave points a
			// cheaper one could spend, yet "If you exceed your primary
			// rate limit, the response status will still be 200, but you
			// will receive an error message, and the value of the
			// x-ratelimit-remaining header will be 0" (graphqlDoc,
			// Exceeding the rate limit).
			left = 0
		}
		hd.Set("X-Ratelimit-Limit", strconv.Itoa(limit))
		hd.Set("X-Ratelimit-Remaining", strconv.Itoa(left))
		hd.Set("X-Ratelimit-Used", strconv.Itoa(win.used))
		hd.Set("X-Ratelimit-Reset", strconv.FormatInt(win.reset.Unix(), 10))
		hd.Set("X-Ratelimit-Resource", res)
		if etag != "" && r.Method == http.MethodGet && (status == http.StatusOK || status == http.StatusNotModified) {
			hd.Set("ETag", etag)
			hd.Set("Vary", "Accept, Authorization, Cookie")
		}
		s.count(r, tok, status, units, took)
		if status == http.StatusOK || status == http.StatusNotModified {
			s.noteReads(principal, rep.reads, now.Add(s.scaled(took)))
		}
		s.logRequest(r, tok, status, kind != "", now)
		s.mu.Unlock()
		if !s.wait(r.Context(), took) {
			// An answer is never sent before its time: the request ends
			// unanswered, as when the server goes away mid-request.
			panic(http.ErrAbortHandler)
		}
		write(w, status, out)
	})
}

// control wraps a /_sim/ endpoint: counted, never charged.
func (s *Sim) control(h func(*http.Request) reply) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := h(r)
		body, _ := encode(rep, "")
		for k, v := range rep.header {
			w.Header()[k] = v
		}
		s.mu.Lock()
		s.count(r, tokenOf(r), rep.status, 0, 0)
		s.mu.Unlock()
		write(w, rep.status, body)
	})
}

// count counts one request received, the budget units it was charged and
// its modelled response time; s.mu is held.
func (s *Sim) count(r *http.Request, tok string, status, units int, took time.Duration) {
	route := r.Pattern
	if route == "/" {
		route = RouteUnmatched
	}
	k := statKey{token: tok, method: r.Method, route: route, status: status}
	s.stats[k]++
	s.points[k] += int64(units)
	s.took[k] += took
}

// write sends an answer.
func write(w http.ResponseWriter, status int, body []byte) {
	if body != nil {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	w.Write(body)
}

// encode marshals rep's body, and names it with a weak ETag as GitHub does.
// The ETag covers the token too: GitHub's answers vary by Authorization
// (their Vary header names it), so one token's ETag is not another's, and
// a rotated installation token starts with no valid ETag.
func encode(rep reply, tok string) ([]byte, string) {
	if rep.body == nil {
		return nil, ""
	}
	body, err := json.Marshal(rep.body)
	if err != nil {
		// Every body is made of this package's own types.
		panic("forgesim: marshal: " + err.Error())
	}
	body = append(body, '\n')
	sum := sha256.Sum256(append([]byte(tok+"\n"), body...))
	return body, `W/"` + hex.EncodeToString(sum[:16]) + `"`
}

// etagMatches tells whether an If-None-Match list names etag; weak and
// strong forms compare equal, as GitHub's do.
func etagMatches(header, etag string) bool {
	if header == "" || etag == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, c := range strings.Split(header, ",") {
		c = strings.TrimSpace(c)
		if c == "*" || strings.TrimPrefix(c, "W/") == want {
			return true
		}
	}
	return false
}

// tokenOf is who a request is from: the token of "token X" or "Bearer X"; a
// GitHub App's JWT is named "app:<issuer>" so every JWT of one App shares a
// budget; "" is none (clientPrincipal).
func tokenOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || (!strings.EqualFold(scheme, "token") && !strings.EqualFold(scheme, "bearer")) {
		return ""
	}
	cred = strings.TrimSpace(cred)
	if iss, ok := jwtIssuer(cred); ok {
		return "app:" + iss
	}
	return cred
}

// jwtClaims is what the simulator reads of a JWT's claims.
type jwtClaims struct {
	Iss json.RawMessage `json:"iss"`
	Iat *int64          `json:"iat"`
	Exp *int64          `json:"exp"`
}

// claimsOf reads the claims of a JWT without checking its signature: the
// simulator trusts every App.
func claimsOf(tok string) (jwtClaims, bool) {
	var claims jwtClaims
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return claims, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims, false
	}
	return claims, json.Unmarshal(payload, &claims) == nil
}

// jwtIssuer reads the iss claim of a JWT (claimsOf).
func jwtIssuer(tok string) (string, bool) {
	claims, ok := claimsOf(tok)
	if !ok || len(claims.Iss) == 0 {
		return "", false
	}
	return string(bytes.Trim(claims.Iss, `"`)), true
}

// jwtMaxAhead is how far past GitHub's clock an App JWT's exp may be:
// "The time must be no more than 10 minutes into the future"
// ("Generating a JSON Web Token (JWT) for a GitHub App":
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app).
const jwtMaxAhead = 10 * time.Minute

// jwtTimeRefusal is GitHub's message refusing r's App JWT for its times
// at now, the simulator's clock, or "" when they pass: an iat after now
// (the page above advises setting it 60 seconds in the past "to protect
// against clock drift"), an exp not after now, or one more than
// jwtMaxAhead after it. The messages are GitHub's as clients recorded
// them (https://github.com/probot/probot/issues/967 for the iat's).
func jwtTimeRefusal(r *http.Request, now time.Time) string {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	claims, _ := claimsOf(strings.TrimSpace(cred))
	switch {
	case claims.Iat == nil || time.Unix(*claims.Iat, 0).After(now):
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	case claims.Exp == nil || !time.Unix(*claims.Exp, 0).After(now):
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case time.Unix(*claims.Exp, 0).After(now.Add(jwtMaxAhead)):
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	return ""
}

// tokenLabel names a token's principal in a primary-limit refusal. (A
// request without a token is named by its address in REST and refused
// with 401 in GraphQL.)
func tokenLabel(tok string) string { return "token " + tok }

// ghTime is GitHub's timestamp format.
func ghTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

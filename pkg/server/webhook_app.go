// App mode's webhooks: the installation events, and the installation every
// event names.

package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/go-github/v88/github"

	"iterion.dev/iterion/pkg/gaterun"
)

// appWebhook handles, in App mode, what a signed webhook says about the
// App's installations, and reports whether it answered w. An installation
// or installation_repositories event is claimed under key (replayKey) as
// a pull_request one is (claim: a body processed within DeliveryWindow is
// 200 {"duplicate": deliveryID}), then keeps the App client's set current
// (200 {"installation": id, "action": ...}) and tells the other replicas
// (installationsChanged); the unsettled runs of the repositories an
// installation_repositories event adds move to its installation
// (moveRuns; "runs_moved": n, or 503 when the store does not answer
// within StoreTimeout). What an event says is gone is forgotten only once
// GitHub confirms it (AppClient.InstallationGone, Covers): a signed body
// can be sent again long after, so one GitHub contradicts is answered 200
// with "not_applied" and changes nothing, and one GitHub did not answer
// for is 503 with Retry-After, for a redelivery. A pull_request or status
// event naming an installation the App client does not know is answered
// 202 {"unknown_installation": id}, and the installation is looked up (a
// re-list of the App's installations, lookUp); its runs are left to the
// sweeper, which picks the installation up once known. A payload it cannot
// read is 400. Any other event is not answered here.
func (s *Server) appWebhook(w http.ResponseWriter, r *http.Request, event string, body []byte, key, deliveryID string) bool {
	switch event {
	case "installation", "installation_repositories", "pull_request", "status":
	default:
		return false
	}
	payload, err := github.ParseWebHook(event, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s payload: %v", event, err))
		return true
	}
	switch ev := payload.(type) {
	case *github.InstallationEvent:
		if s.claim(w, r, key, deliveryID, event) {
			s.processed(key, deliveryID, s.installationEvent(w, r, ev))
		}
		return true
	case *github.InstallationRepositoriesEvent:
		if s.claim(w, r, key, deliveryID, event) {
			s.processed(key, deliveryID, s.installationRepositoriesEvent(w, r, ev))
		}
		return true
	case *github.PullRequestEvent:
		return s.unknownInstallation(w, event, ev.GetInstallation().GetID())
	case *github.StatusEvent:
		return s.unknownInstallation(w, event, ev.GetInstallation().GetID())
	}
	return false
}

// processed counts a claimed installation event's outcome and, when it
// was processed (ok), records it under key (complete); one not processed
// was answered 503, and its claim lapses.
func (s *Server) processed(key, deliveryID string, ok bool) {
	if !ok {
		s.deliveries.WithLabelValues(deliveryUnavailable).Inc()
		return
	}
	s.deliveries.WithLabelValues(deliveryProcessed).Inc()
	s.complete(key, deliveryID)
}

// installationEvent applies installation event ev and answers it,
// reporting whether it was processed (applied, or verified not to apply).
// A deleted or suspend is applied only when GitHub says the installation
// is gone (InstallationGone); the actions that add are applied as they
// come: a replayed one costs a look-up at worst.
func (s *Server) installationEvent(w http.ResponseWriter, r *http.Request, ev *github.InstallationEvent) bool {
	id, action := ev.GetInstallation().GetID(), ev.GetAction()
	if (action == "deleted" || action == "suspend") && id > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.OfferTimeout)
		gone, err := s.cfg.App.InstallationGone(ctx, id)
		cancel()
		if err != nil {
			s.verifyFailed(w, "installation", id, action, err)
			return false
		}
		if !gone {
			s.log.Warn("webhook: installation event not applied: GitHub still has it, not suspended", "installation", id, "action", action)
			writeJSON(w, http.StatusOK, map[string]any{"installation": id, "action": action,
				"not_applied": "GitHub still has the installation, not suspended"})
			return true
		}
	}
	s.installationsChanged(r, s.cfg.App.HandleInstallationEvent(ev))
	s.log.Info("webhook: installation", "installation", id, "action", action,
		"account", ev.GetInstallation().GetAccount().GetLogin())
	writeJSON(w, http.StatusOK, map[string]any{"installation": id, "action": action})
	return true
}

// installationRepositoriesEvent applies installation_repositories event ev
// and answers it, reporting whether it was processed. Of the repositories
// it removes, those GitHub says the installation still covers (Covers)
// are kept, and named in "not_applied"; the event is applied without
// them, and told to the other replicas only when something is left to
// apply.
func (s *Server) installationRepositoriesEvent(w http.ResponseWriter, r *http.Request, ev *github.InstallationRepositoriesEvent) bool {
	id, action := ev.GetInstallation().GetID(), ev.GetAction()
	var kept []string
	if id > 0 && len(ev.RepositoriesRemoved) > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.OfferTimeout)
		removed := ev.RepositoriesRemoved[:0:0]
		for _, repo := range ev.RepositoriesRemoved {
			covered, err := s.cfg.App.Covers(ctx, id, repo.GetFullName())
			if err != nil {
				cancel()
				s.verifyFailed(w, "installation_repositories", id, action, err)
				return false
			}
			if covered {
				kept = append(kept, repo.GetFullName())
			} else {
				removed = append(removed, repo)
			}
		}
		cancel()
		ev.RepositoriesRemoved = removed
		if len(kept) > 0 {
			s.log.Warn("webhook: repositories not removed: GitHub says the installation still covers them", "installation", id, "repositories", kept)
		}
	}
	if len(ev.RepositoriesAdded) > 0 || len(ev.RepositoriesRemoved) > 0 {
		s.installationsChanged(r, s.cfg.App.HandleInstallationRepositoriesEvent(ev))
	}
	ctx, cancel := s.storeCtx(r)
	moved, err := s.moveRuns(ctx, id, ev.RepositoriesAdded)
	cancel()
	if err != nil {
		s.log.Error("webhook: runs of the added repositories not moved to their installation", "installation", id, "err", err)
		s.unavailable(w, "runs not moved; redeliver")
		return false
	}
	s.log.Info("webhook: installation repositories", "installation", id, "action", action,
		"added", len(ev.RepositoriesAdded), "removed", len(ev.RepositoriesRemoved), "runs_moved", moved)
	answer := map[string]any{"installation": id, "action": action, "runs_moved": moved}
	if len(kept) > 0 {
		answer["not_applied"] = map[string]any{"still_covered": kept}
	}
	writeJSON(w, http.StatusOK, answer)
	return true
}

// verifyFailed answers 503 with Retry-After for an installation event
// whose destructive part GitHub did not confirm or deny (err): nothing of
// it was applied, and GitHub's redelivery of it is processed once the
// claim lapses.
func (s *Server) verifyFailed(w http.ResponseWriter, event string, id int64, action string, err error) {
	s.log.Error("webhook: installation event not applied: GitHub did not answer whether it holds", "event", event,
		"installation", id, "action", action, "err", err)
	s.retryAfter(w, s.claimHold(), "GitHub not asked whether the installation event holds; nothing applied; redeliver")
}

// moveRuns gives the unsettled runs of repos, stored under another
// installation, installation id (gaterun.Store.Move, which makes them the
// sweeper's news), so the installation now covering their repository
// offers them; it returns how many moved. A run is moved only if it is
// still unsettled under the installation it was listed with, and keeps
// everything else: a verdict reported or a settle made since the listing
// stands.
func (s *Server) moveRuns(ctx context.Context, id int64, repos []*github.Repository) (int, error) {
	moved := 0
	if id <= 0 {
		return 0, nil // an event without an installation moves nothing
	}
	for _, repo := range repos {
		q := gaterun.Query{Host: s.cfg.ForgeHost, Repo: repo.GetFullName(), State: gaterun.StateUnsettled, Limit: DefaultRunsLimit}
		if q.Validate() != nil {
			continue // not a repository name the runs could have
		}
		for {
			page, err := s.cfg.Runs.List(ctx, q)
			if err != nil {
				return moved, fmt.Errorf("server: list the runs of %s: %w", q.Repo, err)
			}
			for _, run := range page {
				if run.Installation == id {
					continue
				}
				ok, err := s.cfg.Runs.Move(ctx, run.ID, run.Installation, id, s.cfg.Now())
				if err != nil {
					return moved, fmt.Errorf("server: move run %s to installation %d: %w", run.ID, id, err)
				}
				if ok {
					moved++
				}
			}
			if len(page) < q.Limit {
				break
			}
			q.After = gaterun.CursorAt(page[len(page)-1])
		}
	}
	return moved, nil
}

// unknownInstallation answers 202 and asks for a look-up when id (an
// event's installation.id) is one the App client does not know, and
// reports whether it answered. An event without one (a repository's own
// webhook) names none and is processed as in token mode.
func (s *Server) unknownInstallation(w http.ResponseWriter, event string, id int64) bool {
	if id == 0 {
		return false
	}
	if _, err := s.cfg.App.Installation(id); err == nil {
		return false
	}
	s.log.Info("webhook: unknown installation; looking it up", "event", event, "installation", id)
	s.sweeps.lookUp()
	writeJSON(w, http.StatusAccepted, map[string]int64{"unknown_installation": id})
	return true
}

// lookUp asks runApp for a re-list of the App's installations, without
// waiting: requests made while one is pending or running are one.
func (g *installationSweeps) lookUp() {
	select {
	case g.lookups <- struct{}{}:
	default:
	}
}

// startAppNets starts App mode's nets on nets until ctx is done: the
// installations' re-lists and look-ups (runApp), the sweeper group and,
// with board repositories, the board group.
func (s *Server) startAppNets(ctx context.Context, nets *sync.WaitGroup) {
	if s.cmp.NoLease {
		s.log.Warn("--no-lease has no effect on App mode's groups")
	}
	nets.Go(func() { s.runApp(ctx) })
	nets.Go(func() { s.sweeps.run(ctx) })
	if s.boards != nil {
		nets.Go(func() { s.boards.run(ctx) })
	}
}

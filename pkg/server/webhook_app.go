// App mode's webhooks: the installation events, and the installation every
// event names.

package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/go-github/v88/github"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// appWebhook handles, in App mode, what a signed webhook says about the
// App's installations, and reports whether it answered w. An installation
// or installation_repositories event is claimed under key (replayKey) and
// processed by claimAndProcess, answered by answerBy as a pull_request
// one is (200 {"duplicate": deliveryID} for a body processed within
// DeliveryWindow; 202 {"processing": deliveryID} when its processing has
// not ended by answerBy, which then goes on). Its processing
// (installationEvent, installationRepositoriesEvent) keeps the App
// client's set current (200 {"installation": id, "action": ...}) and tells
// the other replicas (installationsChanged); the unsettled runs of the
// repositories an installation_repositories event adds move to its
// installation (moveRuns; "runs_moved": n, or 503 when the store does not
// answer within StoreTimeout). What an event says is gone is forgotten
// only once GitHub confirms it (AppClient.InstallationGone, Covered): a
// signed body can be sent again long after, so one GitHub contradicts is
// answered 200 with "not_applied" and changes nothing, and one GitHub did
// not answer for is 503 with Retry-After, for a redelivery; an
// installation that an installation event would serve again is not when
// GitHub says it is suspended or gone (installationEvent), nor a
// repository an installation_repositories event adds when GitHub says the
// installation does not cover it (installationRepositoriesEvent). A pull_request
// or status event naming an installation the App client does not know is
// answered 202 {"unknown_installation": id}, and the installation is
// looked up (a re-list of the App's installations, lookUp); its runs are
// left to the sweeper, which picks the installation up once known. A
// payload it cannot read is 400, before any claim, counted invalid as
// the token mode's are. Any other event is not answered here.
func (s *Server) appWebhook(w http.ResponseWriter, r *http.Request, event string, body []byte, key, deliveryID string, answerBy time.Time) bool {
	switch event {
	case "installation", "installation_repositories", "pull_request", "status":
	default:
		return false
	}
	payload, err := github.ParseWebHook(event, body)
	if err != nil {
		s.deliveries.WithLabelValues(deliveryInvalid).Inc()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s payload: %v", event, err))
		return true
	}
	switch ev := payload.(type) {
	case *github.InstallationEvent:
		s.claimAndProcess(w, r, key, deliveryID, event, answerBy, func() deliveryAnswer { return s.installationEvent(key, deliveryID, ev) })
		return true
	case *github.InstallationRepositoriesEvent:
		s.claimAndProcess(w, r, key, deliveryID, event, answerBy, func() deliveryAnswer { return s.installationRepositoriesEvent(key, deliveryID, ev) })
		return true
	case *github.PullRequestEvent:
		return s.unknownInstallation(w, event, ev.GetInstallation().GetID())
	case *github.StatusEvent:
		return s.unknownInstallation(w, event, ev.GetInstallation().GetID())
	}
	return false
}

// installationEvent applies installation event ev, delivery deliveryID
// claimed under key, on s.work's context, and records it as processed
// when it was applied or verified not to apply. Each action is checked
// with GitHub (InstallationGone, within OfferTimeout): a deleted or
// suspend is applied only when GitHub says the installation is gone or
// suspended; an action that adds (created, unsuspend,
// new_permissions_accepted) is not applied when GitHub says so, since a
// replayed one would serve a suspended installation again (its runs
// accepted, its token refused), and is applied when GitHub does not
// answer, as before the check: a lost add waits for the hourly re-list.
// One applied ends the installation's mint hold (releaseMint), so a
// new_permissions_accepted, say, has its token asked for at its next
// pass.
func (s *Server) installationEvent(key, deliveryID string, ev *github.InstallationEvent) deliveryAnswer {
	id, action := ev.GetInstallation().GetID(), ev.GetAction()
	removes := action == "deleted" || action == "suspend"
	adds := action == "created" || action == "unsuspend" || action == "new_permissions_accepted"
	if (removes || adds) && id > 0 {
		ctx, cancel := context.WithTimeout(s.work.ctx, s.cfg.OfferTimeout)
		gone, err := s.cfg.App.InstallationGone(ctx, id)
		cancel()
		switch {
		case err != nil && removes:
			return s.verifyFailed("installation", deliveryID, id, action, err)
		case err != nil:
			s.log.Warn("webhook: installation event applied unchecked: GitHub did not answer whether the installation is suspended or gone", "delivery", deliveryID, "installation", id, "action", action, "err", err)
		case removes && !gone:
			s.log.Warn("webhook: installation event not applied: GitHub still has it, not suspended", "delivery", deliveryID, "installation", id, "action", action)
			return s.installationProcessed(key, deliveryID, map[string]any{"installation": id, "action": action,
				"not_applied": "GitHub still has the installation, not suspended"})
		case adds && gone:
			s.log.Warn("webhook: installation event not applied: GitHub says the installation is suspended or gone", "delivery", deliveryID, "installation", id, "action", action)
			return s.installationProcessed(key, deliveryID, map[string]any{"installation": id, "action": action,
				"not_applied": "GitHub says the installation is suspended or gone"})
		}
	}
	s.installationsChanged(s.work.ctx, s.cfg.App.HandleInstallationEvent(ev))
	s.sweeps.releaseMint(id) // new permissions accepted, say: its token is asked for again
	if a, stopped := s.shuttingDown("installation", deliveryID); stopped {
		return a
	}
	s.log.Info("webhook: installation", "delivery", deliveryID, "installation", id, "action", action,
		"account", ev.GetInstallation().GetAccount().GetLogin())
	return s.installationProcessed(key, deliveryID, map[string]any{"installation": id, "action": action})
}

// installationRepositoriesEvent applies installation_repositories event
// ev, delivery deliveryID claimed under key, on s.work's context, and
// records it as processed when it was. Every repository it names is
// checked with GitHub in one call (Covered, within OfferTimeout): a signed
// body can be sent again long after, so of those it removes, the ones
// GitHub says the installation still covers are kept, and of those it
// adds, the ones GitHub says it does not cover are not added (nor their
// runs moved); both are named in "not_applied" and logged. The event is
// applied without them, and told to the other replicas only when
// something is left to apply. When GitHub does not answer, an event that
// removes is 503 with nothing applied (verifyFailed), as a deleted or
// suspend is; one that only adds is applied unchecked, logged at Warn,
// as an adding installation event is (installationEvent): GitHub does
// not redeliver a failed delivery on its own, so refusing it would lose
// a genuine addition, while a replay applied unchecked serves a
// repository no longer covered only until a sweep finds its token cannot
// read the repository's runs (installationSweeps.rehome).
func (s *Server) installationRepositoriesEvent(key, deliveryID string, ev *github.InstallationRepositoriesEvent) deliveryAnswer {
	id, action := ev.GetInstallation().GetID(), ev.GetAction()
	var kept, refused []string
	if id > 0 && len(ev.RepositoriesRemoved)+len(ev.RepositoriesAdded) > 0 {
		removed, added := fullNames(ev.RepositoriesRemoved), fullNames(ev.RepositoriesAdded)
		ctx, cancel := context.WithTimeout(forge.WithLane(s.work.ctx, forge.LaneWebhook), s.cfg.OfferTimeout)
		covered, err := s.cfg.App.Covered(ctx, id, slices.Concat(removed, added))
		cancel()
		switch {
		case err != nil && len(removed) > 0:
			return s.verifyFailed("installation_repositories", deliveryID, id, action, err)
		case err != nil:
			s.log.Warn("webhook: repositories added unchecked: GitHub did not answer whether the installation covers them",
				"delivery", deliveryID, "installation", id, "repositories", added, "err", err)
		default:
			kept = slices.DeleteFunc(removed, func(full string) bool { return !slices.Contains(covered, full) })
			refused = slices.DeleteFunc(added, func(full string) bool { return slices.Contains(covered, full) })
			ev.RepositoriesRemoved = slices.DeleteFunc(ev.RepositoriesRemoved, func(repo *github.Repository) bool {
				return slices.Contains(kept, repo.GetFullName())
			})
			ev.RepositoriesAdded = slices.DeleteFunc(ev.RepositoriesAdded, func(repo *github.Repository) bool {
				return slices.Contains(refused, repo.GetFullName())
			})
		}
		if len(kept) > 0 {
			s.log.Warn("webhook: repositories not removed: GitHub says the installation still covers them", "delivery", deliveryID, "installation", id, "repositories", kept)
		}
		if len(refused) > 0 {
			s.log.Warn("webhook: repositories not added: GitHub says the installation does not cover them", "delivery", deliveryID, "installation", id, "repositories", refused)
		}
	}
	if len(ev.RepositoriesAdded) > 0 || len(ev.RepositoriesRemoved) > 0 {
		s.installationsChanged(s.work.ctx, s.cfg.App.HandleInstallationRepositoriesEvent(ev))
	}
	ctx, cancel := context.WithTimeout(s.work.ctx, s.cfg.StoreTimeout)
	moved, err := s.moveRuns(ctx, id, ev.RepositoriesAdded)
	cancel()
	if err != nil {
		s.log.Error("webhook: runs of the added repositories not moved to their installation", "delivery", deliveryID, "installation", id, "err", err)
		return deliveryAnswer{outcome: deliveryUnavailable,
			write: func(w http.ResponseWriter) { s.unavailable(w, "runs not moved; redeliver") }}
	}
	if a, stopped := s.shuttingDown("installation_repositories", deliveryID); stopped {
		return a
	}
	s.log.Info("webhook: installation repositories", "delivery", deliveryID, "installation", id, "action", action,
		"added", len(ev.RepositoriesAdded), "removed", len(ev.RepositoriesRemoved), "runs_moved", moved)
	answer := map[string]any{"installation": id, "action": action, "runs_moved": moved}
	notApplied := map[string]any{}
	if len(kept) > 0 {
		notApplied["still_covered"] = kept
	}
	if len(refused) > 0 {
		notApplied["not_covered"] = refused
	}
	if len(notApplied) > 0 {
		answer["not_applied"] = notApplied
	}
	return s.installationProcessed(key, deliveryID, answer)
}

// fullNames is the full name ("owner/name") of each of repos.
func fullNames(repos []*github.Repository) []string {
	names := make([]string, len(repos))
	for i, repo := range repos {
		names[i] = repo.GetFullName()
	}
	return names
}

// installationProcessed records installation event deliveryID, claimed
// under key, as processed (complete) and answers it 200 with answer.
func (s *Server) installationProcessed(key, deliveryID string, answer map[string]any) deliveryAnswer {
	s.complete(key, deliveryID)
	return deliveryAnswer{outcome: deliveryProcessed, processed: true,
		write: func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, answer) }}
}

// verifyFailed is the answer to an installation event whose destructive
// part GitHub did not confirm or deny (err): 503 with Retry-After;
// nothing of it was applied, and GitHub's redelivery of it is processed
// once the claim lapses.
func (s *Server) verifyFailed(event, deliveryID string, id int64, action string, err error) deliveryAnswer {
	s.log.Error("webhook: installation event not applied: GitHub did not answer whether it holds", "event", event,
		"delivery", deliveryID, "installation", id, "action", action, "err", err)
	return deliveryAnswer{outcome: deliveryUnavailable, write: func(w http.ResponseWriter) {
		s.retryAfter(w, s.claimHold(), "GitHub not asked whether the installation event holds; nothing applied; redeliver")
	}}
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

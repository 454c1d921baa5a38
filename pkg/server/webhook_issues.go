// The board's webhook: an issues event that takes an issue away from a
// board repository removes its card at once, rather than at the next full
// sync, up to Config.BoardFullEvery later.

package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v88/github"

	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
)

// The issues event's actions that take an issue away from its repository
// (Webhook events and payloads, issues:
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#issues).
// In both, repository is the repository the issue was in and issue.number
// its number there; a transferred one's new place is in changes.new_issue
// and changes.new_repository, which the board does not need. An App
// receives the event only with read access to the Issues permission (same
// page), which the board's issue list needs already.
const (
	issueDeleted     = "deleted"
	issueTransferred = "transferred"
)

// goneIssue is the issue an issues event took away from a board
// repository: number of repo, repo spelt as BoardRepos names it (the
// spelling a board card was first stored under).
type goneIssue struct {
	repo   string
	number int
	action string
	// updated is the issue's updated_at in the payload: its last update
	// before it went, on the forge's clock.
	updated time.Time
}

// issuesWebhook answers a signed issues delivery, body its JSON payload and
// key its replayKey. Without the board, for an action other than deleted
// or transferred, or for a repository not in BoardRepos (compared by
// forge.RepoKey), it is 202 {"ignored": "issues"}, before any store call;
// a payload it cannot read is 400. Else the delivery is claimed and its
// card removed (removeCard) by claimAndProcess, answered within answerBy
// as a pull_request delivery is.
//
// The removal is not checked with the forge (Get an issue, one REST read
// per event, which removeGone makes at a full sync): the signature says
// GitHub sent the event, a replayed one only removes again the card of an
// issue already gone (a repository never gives a number to another
// issue), and a card removed in error comes back when its issue is next
// updated, or at a full sync once its tombstone (board.Store.Remove) is
// dropped.
func (s *Server) issuesWebhook(w http.ResponseWriter, r *http.Request, key, deliveryID string, body []byte, answerBy time.Time) {
	const event = "issues"
	if s.cfg.Board == nil {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": event})
		return
	}
	g, ok, err := s.parseGoneIssue(body)
	if err != nil {
		s.deliveries.WithLabelValues(deliveryInvalid).Inc()
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !ok {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": event})
		return
	}
	s.claimAndProcess(w, r, key, deliveryID, event, answerBy, func() deliveryAnswer { return s.removeCard(key, deliveryID, g) })
}

// parseGoneIssue reads an issues payload: ok when its action is deleted or
// transferred and its repository is in BoardRepos. An error wraps
// errInvalid and names what is missing.
func (s *Server) parseGoneIssue(body []byte) (g goneIssue, ok bool, err error) {
	payload, err := github.ParseWebHook("issues", body)
	if err != nil {
		return goneIssue{}, false, fmt.Errorf("%w: malformed issues payload: %w", errInvalid, err)
	}
	ev, _ := payload.(*github.IssuesEvent)
	action := ev.GetAction()
	if action != issueDeleted && action != issueTransferred {
		return goneIssue{}, false, nil
	}
	repo, number := ev.GetRepo().GetFullName(), ev.GetIssue().GetNumber()
	if repo == "" || number < 1 {
		return goneIssue{}, false, fmt.Errorf("%w: issues payload: repository.full_name %q or issue.number %d missing", errInvalid, clip(repo), number)
	}
	for _, b := range s.cfg.BoardRepos {
		if forge.RepoKey(b) == forge.RepoKey(repo) {
			return goneIssue{repo: b, number: number, action: action, updated: ev.GetIssue().GetUpdatedAt().Time}, true, nil
		}
	}
	return goneIssue{}, false, nil
}

// removeCard removes the card of g (board.Store.Remove, bounded by
// StoreTimeout on s.work's context) and records delivery id, claimed
// under key, as processed; when the store does not answer, the delivery
// is not recorded and its claim lapses, so a redelivery removes the card.
//
// The removal's gone is the later of the payload's issue.updated_at and
// this replica's clock: every read of the issue a board pass may still
// store was updated at or before the payload's, the forge's clock, so the
// tombstone refuses it however far this replica's clock is behind.
func (s *Server) removeCard(key, id string, g goneIssue) deliveryAnswer {
	card := board.CardID(s.cfg.ForgeHost, g.repo, g.number)
	gone := s.cfg.Now()
	if g.updated.After(gone) {
		gone = g.updated
	}
	ctx, cancel := context.WithTimeout(s.work.ctx, s.cfg.StoreTimeout)
	removed, err := s.cfg.Board.Remove(ctx, s.cfg.ForgeHost, g.repo, g.number, gone)
	cancel()
	if err != nil {
		s.log.Error("webhook: board card not removed", "event", "issues", "action", g.action, "delivery", id, "card", card, "err", err)
		return deliveryAnswer{outcome: deliveryUnavailable,
			write: func(w http.ResponseWriter) { s.unavailable(w, "card not removed; redeliver") }}
	}
	s.complete(key, id)
	s.log.Info("webhook: board card of an issue gone", "action", g.action, "delivery", id, "card", card, "removed", removed)
	return deliveryAnswer{outcome: deliveryProcessed, processed: true,
		write: func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, map[string]any{"card": card, "action": g.action, "removed": removed})
		}}
}

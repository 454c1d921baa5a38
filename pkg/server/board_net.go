// The board net's server side: its passes noted for GET /board, and the
// sync status the board's view shows.

package server

import (
	"context"
	"slices"
	"time"

	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/lease"
)

// buildBoard builds the board sync of Config.BoardRepos, if any, whose
// passes run every boardInterval: one board.Sync under the lease
// ForgeBoardSync(), or in App mode the group of installation syncs. It
// checks BoardRepos first in both modes (board.CheckRepos), so App mode,
// whose syncs are built later, per installation, refuses what a board.Sync
// would.
func (s *Server) buildBoard(boardInterval time.Duration) error {
	if len(s.cfg.BoardRepos) == 0 {
		return nil
	}
	if err := board.CheckRepos("BoardRepos", s.cfg.BoardRepos); err != nil {
		return err
	}
	if s.cfg.App != nil {
		pruner, err := board.NewPruner(s.cfg.Board, s.cfg.ForgeHost, s.cfg.BoardRepos, s.cfg.BoardFullEvery)
		if err != nil {
			return err
		}
		s.boards = &installationBoards{s: s, app: s.cfg.App, shards: s.cfg.SweepShards, interval: boardInterval, pruner: pruner}
		return nil
	}
	bs, err := board.NewSync(board.Config{
		Store: s.cfg.Board, Forge: s.cfg.Forge, Host: s.cfg.ForgeHost, Repos: s.cfg.BoardRepos,
		Interval: s.cfg.BoardInterval, FullEvery: s.cfg.BoardFullEvery, Owner: s.cfg.Owner, Now: s.cfg.Now, Logger: s.cfg.Logger, // NewSync adds the owner
		OnPass: s.passes.boardPass(s.cfg.Now, s.boardPassed), Watchdog: s.watchdog(ForgeBoardSync(), boardInterval),
	})
	if err != nil {
		return err
	}
	s.board = bs
	return nil
}

// boardPassed notes a board pass for GET /board's freshness, counts the
// malformed card documents it met, then passes it on to
// Config.OnBoardPass.
func (s *Server) boardPassed(p board.Pass) {
	s.seen.boardPassed(p, s.cfg.Now())
	s.boardMalformed.Add(float64(p.Malformed))
	if s.cfg.OnBoardPass != nil {
		s.cfg.OnBoardPass(p)
	}
}

// boardStatus is GET /board's sync status, from the lease store
// (SyncerUnknown when it cannot say within ctx): the board lease's owner,
// or in App mode the owners of the board group's shards; and this
// replica's last complete pass.
func (s *Server) boardStatus(ctx context.Context) board.Status {
	st := board.Status{LastPass: s.seen.lastBoardPass()}
	insp, ok := s.cfg.Leases.(lease.Inspector)
	var hs []lease.Holder
	var err error
	if ok {
		hs, err = insp.Holders(ctx)
	}
	if !ok || err != nil {
		st.SyncerUnknown = true
		return st
	}
	now := s.cfg.Now()
	if s.boards != nil {
		st.Shards = s.boards.shards
		for _, o := range ForgeBoardSync().shardHolders(hs, st.Shards, now) {
			if o != "" {
				st.Held++
				st.Syncers = append(st.Syncers, o)
			}
		}
		slices.Sort(st.Syncers)
		st.Syncers = slices.Compact(st.Syncers)
		st.Self = slices.Contains(st.Syncers, s.cfg.Owner)
		return st
	}
	for _, h := range hs {
		if h.Name == ForgeBoardSync().Name && now.Before(h.Expires) {
			st.Syncer, st.Self = h.Owner, h.Owner == s.cfg.Owner
		}
	}
	return st
}

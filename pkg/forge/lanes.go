package forge

// Lanes name who spends the forge budget. Every request the Client sends is
// charged to the lane in its context (WithLane); the names live here, in one
// place, so two callers never share one by accident.
const (
	// LaneMergeGateSweeper is the merge-gate sweeper's periodic re-offers (docs/design.md).
	LaneMergeGateSweeper = "merge-gate-sweeper"
	// LaneWebhook is the event path: offers made when a webhook arrives.
	LaneWebhook = "webhook"
	// LaneAPI is work started by a call to the server's HTTP API.
	LaneAPI = "api"
	// LaneAuth is GitHub App installation-token refreshes; the Client charges
	// them here whatever lane the request that triggered the refresh carried.
	LaneAuth = "auth"
	// LaneUnlaned is where a request without a lane is charged; it is never dropped.
	LaneUnlaned = "unlaned"
	// LaneBoardSync is the forge board issue sync.
	LaneBoardSync = "forge-board-sync"
)

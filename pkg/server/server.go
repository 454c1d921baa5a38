// Package server is the merge-gate server (docs/design.md) and the wiring of every
// net it elects.
//
// The merge gate: the reconciler that brings a pull request's commit status
// in line with a gating run's verdict, and the merge-gate sweeper that
// re-offers unsettled runs. The runs and their stores are
// [iterion.dev/iterion/pkg/gaterun]'s; the webhook delivery ids already
// processed are [iterion.dev/iterion/pkg/delivery]'s.
//
// The wiring: a [Server] elects each periodic net through one helper that
// runs it under its lease with [lease.Run]: the sweeper under
// [MergeGateSweeper], and the forge board sync of
// [iterion.dev/iterion/pkg/board] under [ForgeBoardSync]. Every lease is
// declared in leases.go. The HTTP API serves runs, GitHub webhooks,
// /healthz, /metrics, /leases and the board's view at /board.
//
// A [Server] is assembled explicitly from its dependencies with [New]; several
// Servers can run in one process (each has its own Prometheus registry and
// no package-level state).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leaseprom"
)

// Config assembles a Server from its dependencies. Runs, Leases, one of
// Forge and App, and APIToken are required; a zero optional field means
// the default its comment names.
type Config struct {
	// Runs keeps the gating runs (gaterun.MemoryStore or gaterun.MongoStore).
	Runs gaterun.Store
	// Leases elects the nets (lease.MemoryStore or mongolease.MongoStore). It
	// should implement lease.Inspector for /leases (App mode requires it:
	// its nets are lease groups).
	Leases lease.Store
	// Forge is the forge client of a token or of one App installation,
	// which serves every repository. Run closes it when it returns, which
	// writes the partial hourly line. Set Forge or App, not both.
	Forge *forge.Client
	// App serves every installation of a GitHub App (App mode): each run
	// is offered through its installation's client, the sweeper is the
	// lease group merge-gate-sweeper of SweepShards shards, each
	// installation swept on the shard InstallationShard names, and the
	// board sync the group forge-board-sync. Run runs its re-list
	// (AppClient.Run) and closes it when it returns. Set Forge or App,
	// not both.
	App *forge.AppClient
	// SweepShards is how many shards the App-mode sweeper and board groups
	// have; 0 means DefaultSweepShards. Unused without App.
	SweepShards int
	// InstallationConcurrency is how many installations one App-mode shard
	// term sweeps at once; 0 means DefaultInstallationConcurrency. Unused
	// without App.
	InstallationConcurrency int
	// ForgeHost is the forge host recorded on runs and in their ids;
	// "" means "github.com".
	ForgeHost string
	// APIToken is the bearer token POST /api/runs and GET /api/runs
	// require; it also opens the pages.
	APIToken string
	// PagesToken is a read-only token that opens the pages (/, /leases,
	// /runs, /board, /installations and their JSON views), as a bearer
	// token or as the password of basic auth, and nothing else; "" means
	// only APIToken opens them. /healthz and /metrics need no token.
	PagesToken string
	// PublicPages serves the pages without a token. They list
	// repositories, pull requests, head SHAs, issue titles and assignees:
	// open them only on a network where those may be read.
	PublicPages bool
	// AllowedHosts, when not empty, are the host names a request's Host
	// may name, each "name" (any port) or "name:port" (that port only),
	// compared without regard to case; a request naming another answers
	// 421 Misdirected Request, except the probes, /healthz and /readyz.
	// Set it wherever a browser can reach the replicas, and always with
	// PublicPages: else a page on any domain whose name rebinds to a
	// replica's address (DNS rebinding) reads the pages through its
	// viewer's browser. Empty: every host is served. New refuses an entry
	// that is not a host name or address, with or without a port.
	AllowedHosts []string
	// WebhookSecret is the secret of X-Hub-Signature-256 on POST
	// /webhooks/github; "" turns webhooks off (the endpoint answers 404),
	// since an unsigned event is never accepted.
	WebhookSecret string
	// Owner is this replica's identity in the lease store, logs and
	// /leases; "" means a fresh one: the host name plus a random suffix.
	Owner string
	// SweepInterval is the sweeper's interval; 0 means DefaultSweepInterval.
	// The sweeper's lease TTL and retry derive from it (MergeGateSweeper).
	// A pass begins a batch only when it would end within the interval
	// however long it waits (GitHub's 10 s query timeout on ForgeMinute's
	// clock, or the forge client's Timeout when shorter), so New refuses an
	// interval no longer than that wait.
	SweepInterval time.Duration
	// SweepTimeShare is the share, above 0 and at most 1, of GitHub's
	// GraphQL CPU-time limit (60 s a minute) the sweeper may spend in any
	// minute (ForgeMinute), per installation, whatever SweepInterval is; 0
	// means DefaultSweepTimeShare.
	SweepTimeShare float64
	// ForgeMinute is GitHub's minute on this replica's clock: the window
	// of the sweeper's time budget, and what GitHub's 10 s query timeout is
	// scaled by. 0 means a minute, as against GitHub. Only a demo or a
	// harness whose forge simulator compresses its minute
	// (forgesim.WithMinute) sets it, to the same length.
	ForgeMinute time.Duration
	// SweepConcurrency is how many of a pass's batches may be in flight at
	// once, per installation, from 1 to MaxSweepConcurrency; 0 means 1:
	// one at a time, as GitHub advises. The time budget keeps a whole
	// GitHub timeout free for each batch in flight.
	SweepConcurrency int
	// Board keeps the forge board's cards (board.MemoryStore or
	// board.MongoStore); nil means a new board.MemoryStore. It is unused
	// without BoardRepos, and GET /board then answers 404.
	Board board.Store
	// BoardRepos are the repositories ("owner/name") whose issues the board
	// sync keeps as cards, under lease ForgeBoardSync() (in App mode, the
	// group forge-board-sync: each repository on the shard of the
	// installation covering it, through its client); empty: the board net
	// does not run. New refuses an entry that is not "owner/name" or names
	// a repository an earlier entry names (names compare without regard to
	// case, as GitHub compares them).
	BoardRepos []string
	// BoardInterval is the board sync's interval; 0 means
	// board.DefaultInterval. Its lease TTL and retry derive from it.
	BoardInterval time.Duration
	// BoardFullEvery is how long a board repository goes between two full
	// syncs (board.Config.FullEvery), each of which reads every stored card
	// the issue list no longer shows, one request each; 0 means
	// board.DefaultFullEvery.
	BoardFullEvery time.Duration
	// OfferTimeout bounds the offers of one API or webhook request;
	// 0 means 10 seconds.
	OfferTimeout time.Duration
	// WebhookAnswerWithin bounds how long after its headers a webhook
	// delivery is answered, under GitHub's 10 s (GitHubWebhookTimeout),
	// past which GitHub records a delivery as failed, however it ends: a
	// claimed delivery still being processed then is answered 202 and its
	// processing goes on, bounded as the claim's hold counts it. 0 means
	// DefaultWebhookAnswerWithin; New refuses GitHubWebhookTimeout or more.
	WebhookAnswerWithin time.Duration
	// StoreTimeout bounds each store call a request makes (the run put, a
	// webhook's lookups, /leases); past it the request answers 503 with
	// Retry-After. 0 means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Deliveries remembers processed webhook deliveries by the SHA-256 of
	// their signed body, so a replayed delivery is acknowledged and not
	// processed again, whatever its X-GitHub-Delivery, and holds
	// the claims of those being processed; nil means
	// a new delivery.MemoryStore, which only this replica sees. Share a
	// delivery.MongoStore between replicas.
	Deliveries delivery.Store
	// DeliveryWindow is how long a delivery is remembered; 0 means
	// delivery.DefaultWindow.
	DeliveryWindow time.Duration
	// Limits bound the HTTP server (timeouts, connections open at once,
	// header and body sizes); a zero field means its DefaultLimits value.
	Limits Limits
	// ShutdownTimeout bounds the wait for in-flight requests, and for the
	// webhook deliveries still being processed after their answer, when
	// Run stops (one deadline for both); 0 means 10 seconds.
	ShutdownTimeout time.Duration
	// Logger receives the server's logs; nil discards.
	Logger *slog.Logger
	// Registry gets the server's and the leases' metrics and is served at
	// /metrics; nil means a new one. Pass the one the forge client counts
	// into, so /metrics shows forge_http_requests_total too.
	Registry *prometheus.Registry
	// Now is the clock of run timestamps and sweep windows; nil means time.Now.
	Now func() time.Time
	// OnLeaseEvent is called synchronously on each transition (Elected,
	// SteppedDown, Released) of every elected net's lease, not on its store
	// calls; it must not block. nil: none.
	OnLeaseEvent func(lease.Event)
	// OnSweep is called synchronously after each sweep pass; it must not
	// block. nil: none.
	OnSweep func(SweepPass)
	// OnBoardPass is called synchronously after each board sync pass; it
	// must not block. nil: none.
	OnBoardPass func(board.Pass)
}

// Server is one replica of the merge-gate server. Build it with New, serve
// Handler (or let Run serve it), and call Run once. Several Servers can run
// in one process: each keeps its state and metrics to itself. Safe for
// concurrent use.
type Server struct {
	cfg     Config
	cmp     Comparison   // the zero value in production
	log     *slog.Logger // cfg.Logger with this replica's owner
	rec     *reconciler
	sweeper *sweeper            // nil in App mode
	sweeps  *installationSweeps // App mode's sweeper; nil otherwise
	board   *board.Sync         // nil: no BoardRepos, or App mode
	boards  *installationBoards // App mode's board sync; nil without BoardRepos
	leases  *leaseprom.Metrics
	health  *lease.Health
	offers  *prometheus.CounterVec
	// conns counts the open connections of this replica's HTTPServers
	// (http_connections_open).
	conns prometheus.Gauge
	// deliveries counts webhook deliveries by outcome; work processes the
	// claimed ones (webhook_answer.go).
	deliveries *prometheus.CounterVec
	// unrecorded counts processed deliveries whose completion the
	// delivery store did not take (complete).
	unrecorded prometheus.Counter
	// boardMalformed counts the card documents the board sync's passes
	// met and could not read (board.Pass.Malformed).
	boardMalformed prometheus.Counter
	work           *deliveryWork
	seen           observed
	ready          readiness
	passes         *netMetrics
	handler        http.Handler
	// hosts is cfg.AllowedHosts, parsed (checkHost).
	hosts hostList
	// probes serves /healthz, /readyz and /metrics alone (ProbeHandler).
	probes http.Handler
	// largeReads holds a token per webhook body over 1 MiB being read;
	// largeBy how many each remote address is reading (takeLargeSlot).
	largeReads chan struct{}
	largeMu    sync.Mutex
	largeBy    map[string]int
	// stalls signals, by lease name, that this replica's term of the net
	// ended because its passes kept failing; filled in New, read-only after.
	stalls map[string]chan struct{}
	// measureCalls counts the measurement group's store calls; nil
	// without Comparison.MeasureGroupShards.
	measureCalls *prometheus.CounterVec
	recorder     *sweepRecorder // App mode's sweep records (sweep_record.go); nil: none
	adopter      *adopter       // App mode's run adopter (adopt.go); nil: none
}

// ErrConfig reports a Config New cannot use; errors that wrap it name the
// field.
var ErrConfig = errors.New("server: invalid config")

// Comparison turns a replica back into a design ADR-117 replaced, so a
// measurement can compare the two; no production replica sets it. Its
// zero value is the production replica, as New builds it.
type Comparison struct {
	// NoLease runs every elected net on this replica without a lease, as
	// before ADR-117: every replica does the work (iterion serve
	// --no-lease).
	NoLease bool
	// SweepMode is how the sweeper reads: SweepBatch (the default, "") or
	// SweepREST, the per-run REST sweep it replaced (iterion serve
	// --sweep-mode).
	SweepMode SweepMode
	// NoSweepTimeBudget lifts the sweeper's time budget and interval stop
	// (SweepPass.ForgeTime), so a pass runs to its end however long its
	// forge reads take (iterion serve --sweep-no-time-budget): for a
	// harness on a compressed clock whose forge answers at once, where
	// the time a pass takes is the machine's, not GitHub's. A deep pass
	// then lists the deep window alone, without the shallow window first.
	NoSweepTimeBudget bool
	// MeasureGroupShards, when positive, runs the lease group MeasureGroup()
	// of that many shards on this replica, whose work only holds its shard
	// terms, so a measurement can watch a group's spread, hand-overs and
	// store cost on real processes (iterion serve --measure-group-shards).
	// Each shard term's start and end is logged at Info ("measure group:
	// shard term", with shard and event), and the group's store calls are
	// counted in measure_group_store_calls_total{op}. 0 runs no group;
	// negative is invalid.
	MeasureGroupShards int
}

// New validates cfg, fills in its defaults and returns a Server. Errors
// wrap ErrConfig and name the field.
func New(cfg Config) (*Server, error) {
	return NewForComparison(cfg, Comparison{})
}

// NewForComparison is New for a replica run as cmp says, for comparison
// measurements only (the benchmark harness, the demo). Errors wrap
// ErrConfig and name the field, Comparison's as "Comparison.SweepMode".
func NewForComparison(cfg Config, cmp Comparison) (*Server, error) {
	switch {
	case cfg.Runs == nil:
		return nil, fmt.Errorf("%w: Runs is nil", ErrConfig)
	case cfg.Leases == nil:
		return nil, fmt.Errorf("%w: Leases is nil", ErrConfig)
	case cfg.Forge == nil && cfg.App == nil:
		return nil, fmt.Errorf("%w: Forge and App are nil: set one", ErrConfig)
	case cfg.Forge != nil && cfg.App != nil:
		return nil, fmt.Errorf("%w: Forge and App are both set: choose one", ErrConfig)
	case cfg.SweepShards < 0:
		return nil, fmt.Errorf("%w: SweepShards %d is negative", ErrConfig, cfg.SweepShards)
	case cfg.InstallationConcurrency < 0:
		return nil, fmt.Errorf("%w: InstallationConcurrency %d is negative", ErrConfig, cfg.InstallationConcurrency)
	case strings.TrimSpace(cfg.APIToken) == "":
		return nil, fmt.Errorf("%w: APIToken is empty", ErrConfig)
	case cfg.PagesToken != "" && strings.TrimSpace(cfg.PagesToken) == "":
		return nil, fmt.Errorf("%w: PagesToken is blank", ErrConfig)
	case !(cfg.SweepTimeShare >= 0 && cfg.SweepTimeShare <= 1):
		return nil, fmt.Errorf("%w: SweepTimeShare %v is not within 0 to 1", ErrConfig, cfg.SweepTimeShare)
	case cfg.SweepConcurrency < 0 || cfg.SweepConcurrency > MaxSweepConcurrency:
		return nil, fmt.Errorf("%w: SweepConcurrency %d is not within 0 to %d", ErrConfig, cfg.SweepConcurrency, MaxSweepConcurrency)
	case cfg.SweepInterval < 0:
		return nil, fmt.Errorf("%w: SweepInterval %v is negative", ErrConfig, cfg.SweepInterval)
	case cfg.ForgeMinute < 0:
		return nil, fmt.Errorf("%w: ForgeMinute %v is negative", ErrConfig, cfg.ForgeMinute)
	case cfg.SweepInterval > 0 && cfg.SweepInterval < lease.MinTTL:
		return nil, fmt.Errorf("%w: SweepInterval %v is under %v", ErrConfig, cfg.SweepInterval, lease.MinTTL)
	case cfg.BoardInterval < 0:
		return nil, fmt.Errorf("%w: BoardInterval %v is negative", ErrConfig, cfg.BoardInterval)
	case cfg.BoardInterval > 0 && cfg.BoardInterval < lease.MinTTL:
		return nil, fmt.Errorf("%w: BoardInterval %v is under %v", ErrConfig, cfg.BoardInterval, lease.MinTTL)
	case cfg.BoardFullEvery < 0:
		return nil, fmt.Errorf("%w: BoardFullEvery %v is negative", ErrConfig, cfg.BoardFullEvery)
	case cmp.SweepMode != "" && cmp.SweepMode != SweepBatch && cmp.SweepMode != SweepREST:
		return nil, fmt.Errorf("%w: Comparison.SweepMode %q is not %q or %q", ErrConfig, cmp.SweepMode, SweepBatch, SweepREST)
	case cmp.MeasureGroupShards < 0:
		return nil, fmt.Errorf("%w: Comparison.MeasureGroupShards %d is negative", ErrConfig, cmp.MeasureGroupShards)
	case cfg.OfferTimeout < 0:
		return nil, fmt.Errorf("%w: OfferTimeout %v is negative", ErrConfig, cfg.OfferTimeout)
	case cfg.ShutdownTimeout < 0:
		return nil, fmt.Errorf("%w: ShutdownTimeout %v is negative", ErrConfig, cfg.ShutdownTimeout)
	case cfg.WebhookAnswerWithin < 0 || cfg.WebhookAnswerWithin >= GitHubWebhookTimeout:
		return nil, fmt.Errorf("%w: WebhookAnswerWithin %v is not within 0 and GitHub's webhook timeout, %v", ErrConfig, cfg.WebhookAnswerWithin, GitHubWebhookTimeout)
	case cfg.StoreTimeout < 0:
		return nil, fmt.Errorf("%w: StoreTimeout %v is negative", ErrConfig, cfg.StoreTimeout)
	case cfg.DeliveryWindow < 0:
		return nil, fmt.Errorf("%w: DeliveryWindow %v is negative", ErrConfig, cfg.DeliveryWindow)
	}
	limits, err := cfg.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	hosts, err := parseHosts(cfg.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("%w: AllowedHosts: %w", ErrConfig, err)
	}
	cfg.Limits = limits
	if cfg.ForgeHost == "" {
		cfg.ForgeHost = "github.com"
	}
	if cfg.Owner == "" {
		cfg.Owner = NewOwner()
	}
	switch {
	case len(cfg.BoardRepos) == 0:
		cfg.Board = nil // no board net: GET /board is not found
	case cfg.Board == nil:
		cfg.Board = board.NewMemoryStore()
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if err := checkSweepWait(cfg, cmp); err != nil {
		return nil, err
	}
	if cfg.SweepShards == 0 {
		cfg.SweepShards = DefaultSweepShards
	}
	if cfg.InstallationConcurrency == 0 {
		cfg.InstallationConcurrency = DefaultInstallationConcurrency
	}
	if cfg.OfferTimeout == 0 {
		cfg.OfferTimeout = 10 * time.Second
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.WebhookAnswerWithin == 0 {
		cfg.WebhookAnswerWithin = DefaultWebhookAnswerWithin
	}
	if cfg.Deliveries == nil {
		cfg.Deliveries = delivery.NewMemoryStore()
	}
	if cfg.DeliveryWindow == 0 {
		cfg.DeliveryWindow = delivery.DefaultWindow
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Logger.With("owner", cfg.Owner) // once: every line of this replica names it
	if cfg.WebhookSecret == "" {
		log.Warn("webhooks are off: no webhook secret configured")
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	storeFailures := newRunStoreFailures()
	cfg.Runs = countRuns(cfg.Runs, storeFailures)
	s := &Server{
		cfg:    cfg,
		cmp:    cmp,
		log:    log,
		hosts:  hosts,
		leases: leaseprom.New(cfg.Registry),
		offers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_offers_total",
			Help: "Offers of gating runs, by lane (who offered) and outcome.",
		}, []string{"lane", "outcome"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "http_connections_open",
			Help: "HTTP connections open on this replica's HTTP server, from accept to close; at http_connections_max new connections wait unserved until one closes.",
		}),
		deliveries: newDeliveryOutcomes(),
		unrecorded: newDeliveriesUnrecorded(),
		work:       newDeliveryWork(),
		largeReads: make(chan struct{}, cfg.Limits.LargeWebhookReads),
		largeBy:    make(map[string]int),
		stalls:     map[string]chan struct{}{MergeGateSweeper().Name: make(chan struct{}, 1), ForgeBoardSync().Name: make(chan struct{}, 1), RunAdopter().Name: make(chan struct{}, 1)},
	}
	if cfg.App != nil {
		s.rec = newReconcilerOf(cfg.Runs, appForge(cfg.App), log)
	} else {
		s.rec = newReconciler(cfg.Runs, cfg.Forge, log)
	}
	s.recorder = newSweepRecorder(cfg, log)
	backingOff := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "merge_gate_runs_backing_off",
		Help: "Gating runs whose pull request the forge would not show (404/403, NOT_FOUND/FORBIDDEN), which the sweeper skips until their back-off ends.",
	})
	behind := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "merge_gate_sweep_behind",
		Help: "1 while the sweeper's last pass on this replica could not keep up: its shallow window (runs of the last hour) unfinished at its time budget, or its deep window unfinished after the deep-pass period; else 0.",
	})
	behindPasses := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "merge_gate_sweep_passes_behind_total",
		Help: "The sweeper's passes on this replica that were behind, by window: shallow when the pass stopped before the end of its shallow window, the runs of the last hour (at its time budget, a rate limit or its term's end), else deep when a run of the deep window is checked past the deep-pass period. Over iterion_net_pass_duration_seconds_count{lease=\"merge-gate-sweeper\"}, the share of passes that left runs for later.",
	}, []string{"window"})
	for _, w := range behindWindows {
		behindPasses.WithLabelValues(w) // both series from the start, so a rate over them is 0, not absent
	}
	malformed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "merge_gate_sweep_malformed_runs_total",
		Help: "Run documents (gate_runs) the store cannot read as runs (a field of the wrong type or value, a repo_key not its repo's) that the sweeper's passes on this replica skipped, each counted once a pass: the runs they stand for are not swept, the others are. The log line \"sweep skipped a run document it cannot read\" names the document's _id and the field.",
	})
	s.boardMalformed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "board_malformed_cards_total",
		Help: "Card documents (board_cards) the store cannot read as cards or tombstones (a field of the wrong type, an _id not its card's, a tombstone where a card is expected) that the board sync's passes on this replica met, each counted once a pass: skipped by its listings (the issue's card is off the board) or replaced by the card the pass put. The log line \"board sync met a card document it cannot read\" names the document's _id and the field.",
	})
	maxConns := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "http_connections_max",
		Help: "The cap on HTTP connections open at once on the listener this replica serves (Limits.MaxConnections, --max-connections).",
	})
	maxConns.Set(float64(cfg.Limits.MaxConnections))
	collectors := []prometheus.Collector{s.offers, s.conns, maxConns, s.deliveries, s.unrecorded, newDeliveryPruneFailures(cfg.Deliveries), backingOff, behind, behindPasses, malformed, s.boardMalformed, storeFailures}
	var rehomed, mintsRefused prometheus.Counter
	var uncovered *prometheus.GaugeVec
	if cfg.App != nil {
		mintsRefused = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "merge_gate_installation_mints_refused_total",
			Help: "App mode: installation token mints GitHub refused 403 while it says the installation is there, not suspended (the App's permissions not accepted, an organization's IP allow list, a transient refusal), on this replica's sweepers. Each holds that installation's mints back, one interval after the first, doubling up to the re-list period; its sweeps wait meanwhile. The log names the installation.",
		})
		rehomed = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "merge_gate_runs_rehomed_total",
			Help: "Unsettled gating runs moved from an installation whose token GitHub refused for their pull request to the installation GitHub says covers their repository now (App mode): the installation_repositories webhook that moved the repository did not reach this deployment.",
		})
		uncovered = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "merge_gate_runs_uncovered",
			Help: "App mode: unsettled gating runs whose repository no installation of the App covers, so no verdict of theirs is published; by found_by: adopter, those stored under an installation the App does not know (set by the run adopter's holder, 0 on other replicas); sweeper, those under an installation the App knows whose token GitHub refused for their pull request, summed over the installations this replica sweeps. Sum over the replicas for the deployment's.",
		}, []string{"found_by"})
		for _, by := range uncoveredFinders {
			uncovered.WithLabelValues(by) // both series from the start
		}
		unswept := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "merge_gate_installations_unswept",
			Help: "App mode: installations this replica sweeps with no complete pass here for 3 sweep intervals (parked, backing off, without a token or a slot, rate limited), counted from their sweep's start here when none has had one. The log lines of their sweepers name them; GET /installations shows each one's last complete pass.",
		}, func() float64 { return float64(s.sweeps.unswept()) })
		collectors = append(collectors, rehomed, mintsRefused, uncovered, unswept)
	}
	for _, c := range collectors {
		if err := cfg.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("%w: Registry: %w", ErrConfig, err)
		}
	}
	if s.passes, err = newNetMetrics(cfg.Registry); err != nil {
		return nil, fmt.Errorf("%w: Registry: %w", ErrConfig, err)
	}
	s.adopter = newAdopter(s, uncovered)
	if cmp.MeasureGroupShards > 0 {
		if s.measureCalls, err = newMeasureCalls(cfg.Registry); err != nil {
			return nil, fmt.Errorf("%w: Registry: %w", ErrConfig, err)
		}
	}
	boardInterval := cfg.BoardInterval
	if boardInterval == 0 {
		boardInterval = board.DefaultInterval
	}
	s.health = lease.NewHealth(healthBound(cfg.SweepInterval, boardInterval, len(cfg.BoardRepos) > 0))
	var sweptUncovered prometheus.Gauge
	if uncovered != nil {
		sweptUncovered = uncovered.WithLabelValues(foundBySweeper)
	}
	s.buildSweeper(backingOff, behind, behindPasses, malformed, rehomed, mintsRefused, sweptUncovered)
	if err := s.buildBoard(boardInterval); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, n := range s.nets() {
		s.passes.interval.WithLabelValues(n.lease.Name).Set(n.interval.Seconds())
	}
	if s.sweeps != nil {
		s.passes.interval.WithLabelValues(MergeGateSweeper().Name).Set(cfg.SweepInterval.Seconds())
	}
	s.handler = s.checkHost(s.routes())
	s.probes = s.probeRoutes()
	return s, nil
}

// Owner is this replica's identity in the lease store.
func (s *Server) Owner() string { return s.cfg.Owner }

// Run serves HTTP on ln (when ln is not nil), at most
// Limits.MaxConnections connections at once (Listener), and runs the
// elected nets until ctx is done, then shuts down in order: it stops
// taking requests (waiting
// up to ShutdownTimeout for those in flight, and within the same deadline
// for the webhook deliveries still being processed after their answer,
// cancelling those left, whose claims lapse), ends the nets' terms and
// releases their leases, and closes the forge client, which writes the
// partial hourly line. It returns nil after a shutdown caused by ctx, or
// the error that stopped serving. Call it once, or RunWithProbes instead.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	return s.RunWithProbes(ctx, ln, nil)
}

// RunWithProbes is Run serving, as well, ProbeHandler on probes (when
// probes is not nil) through ProbeListener, outside ln's connection cap:
// clients holding every connection ln allows then do not fail the
// kubelet's probes, which would restart a replica that is only busy.
// It stops taking requests on both listeners at the shutdown.
func (s *Server) RunWithProbes(ctx context.Context, ln, probes net.Listener) error {
	netsCtx, stopNets := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNets()
	var nets sync.WaitGroup
	for _, n := range s.nets() {
		nets.Go(func() { s.elect(netsCtx, n) })
	}
	if s.cmp.MeasureGroupShards > 0 {
		nets.Go(func() { s.measureGroup(netsCtx) })
	}
	if s.cfg.App != nil {
		s.startAppNets(netsCtx, &nets)
	}
	s.recorder.start(netsCtx, &nets)
	var srv, probeSrv *http.Server
	served := make(chan error, 2)
	if ln != nil {
		srv = s.HTTPServer()
		limited := s.Listener(ln)
		go func() { served <- srv.Serve(limited) }()
		s.log.Info("listening", "addr", ln.Addr().String())
	}
	if probes != nil {
		probeSrv = s.ProbeHTTPServer()
		limited := s.ProbeListener(probes)
		go func() { served <- probeSrv.Serve(limited) }()
		s.log.Info("listening for probes", "addr", probes.Addr().String())
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		err = fmt.Errorf("server: serve: %w", err)
	}
	s.log.Info("shutting down: stop taking requests")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	for _, hs := range []*http.Server{srv, probeSrv} {
		if hs == nil {
			continue
		}
		if serr := hs.Shutdown(sctx); serr != nil {
			s.log.Warn("requests still in flight at the shutdown timeout", "err", serr)
		}
	}
	s.log.Info("shutting down: finish the webhook deliveries being processed")
	s.work.drain(sctx, s.log)
	cancel()
	s.log.Info("shutting down: end the elected nets' terms")
	stopNets()
	nets.Wait()
	s.log.Info("shutting down: flush the forge hourly line")
	if s.cfg.App != nil {
		s.cfg.App.Close()
	} else {
		s.cfg.Forge.Close()
	}
	return err
}

// offer offers run on lane and counts the outcome.
func (s *Server) offer(ctx context.Context, lane string, run gaterun.Run) (outcome, error) {
	return s.offerBy(ctx, s.rec, lane, run)
}

// offerBy offers run on lane through rec and counts the outcome.
func (s *Server) offerBy(ctx context.Context, rec *reconciler, lane string, run gaterun.Run) (outcome, error) {
	out, err := rec.Offer(forge.WithLane(ctx, lane), run)
	s.offered(lane, run.ID, out, err)
	return out, err
}

// offered counts an offer of run id on lane in gate_offers_total and notes
// it as the run's last offer on this replica (GET /api/runs/{id}, /runs).
func (s *Server) offered(lane, id string, out outcome, err error) {
	s.offers.WithLabelValues(lane, string(out)).Inc()
	s.seen.offered(id, lane, out, err, s.cfg.Now())
}

package harness

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/server"
)

// cluster is the set of processes one harness run drives: one
// `dev-mongo`, one `iterion forge-sim`, and the `iterion serve`
// replicas, each behind its own forwarder to Mongo. Methods are called from
// one goroutine at a time.
type cluster struct {
	bins     binaries
	dir      string // logs and Mongo's files
	interval time.Duration
	apiToken string
	hc       *http.Client // every request the harness sends

	mongo     *proc
	mongoAddr string // host:port dev-mongo listens on
	mongoQS   string // the URI's query string, kept for the replicas
	sim       sim
	simProc   *proc
	replicas  []*replica
	seq       int // replicas started so far, for unique names and tokens
	// listenAddr gives a replica its --listen address: freeAddr.
	listenAddr func() (string, error)
	// startOnce starts replica seq of spec once, startReplica trying it
	// again on another port: startReplicaOnce, or a unit test's scripted
	// stand-in.
	startOnce func(ctx context.Context, seq int, spec replicaSpec) (*replica, error)
}

// simBudget is the simulator's per-token hourly budget outside the budget
// scenario: far above anything a run spends, so nothing is rate limited.
const simBudget = 10_000_000

// binaries are the built commands a cluster runs.
type binaries struct {
	iterion  string // ./cmd/iterion: forge-sim and the serve replicas
	devMongo string // ./cmd/dev-mongo
}

// replica is one `iterion serve` process. Its forge token is unique to it, so
// the simulator's per-token counts are its requests and nobody else's.
type replica struct {
	name    string
	token   string
	owner   string // its lease owner identity, from GET /healthz
	noLease bool
	p       process
	fwd     *forwarder
	api     api
}

// process is a replica's command as the cluster and the scenarios drive
// it: a *proc, or in a unit test a stand-in that records the signals sent
// to it. Its methods are proc's.
type process interface {
	signal(sig syscall.Signal) error
	wait(timeout time.Duration) bool
	stop(grace time.Duration)
	exited() bool
	stderrPath() string
	pid() int
}

// startCluster starts dev-mongo and forge-sim with their files and logs in
// dir. budget is the simulator's per-token hourly budget; interval is its
// minute, the window of GitHub's per-minute secondary limits; simArgs are
// more forge-sim flags.
func startCluster(ctx context.Context, bins binaries, dir string, interval time.Duration, budget int, simArgs ...string) (*cluster, error) {
	c := &cluster{bins: bins, dir: dir, interval: interval, apiToken: "harness-api-token", hc: newHTTPClient(), listenAddr: freeAddr}
	c.startOnce = c.startReplicaOnce
	if err := c.startMongo(""); err != nil {
		return nil, err
	}
	var err error
	args := append([]string{"forge-sim", "--listen", "127.0.0.1:0", "--budget", fmt.Sprint(budget),
		"--minute", interval.String()}, simArgs...) // the interval is the compressed minute of the secondary limits
	c.simProc, err = startProc(dir, "forge-sim", bins.iterion, args...)
	if err != nil {
		c.close()
		return nil, err
	}
	line, err := c.simProc.waitLine(30 * time.Second)
	if err != nil {
		c.close()
		return nil, err
	}
	u := extractURL(line, "")
	if u == "" {
		c.close()
		return nil, fmt.Errorf("%w: forge-sim printed %q, want its URL", ErrProcess, line)
	}
	c.sim = sim{url: strings.TrimRight(u, "/"), hc: newSimHTTPClient()}
	return c, nil
}

// startMongo starts dev-mongo on addr (a free port when empty) with its files
// in the cluster's directory, so a restart on the same address keeps the data.
func (c *cluster) startMongo(addr string) error {
	if addr == "" {
		var err error
		if addr, err = freeAddr(); err != nil {
			return err
		}
	}
	mdir := filepath.Join(c.dir, "mongo")
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrProcess, err)
	}
	p, err := startProc(c.dir, "dev-mongo", c.bins.devMongo, "--listen", addr, "--dir", mdir)
	if err != nil {
		return err
	}
	line, err := p.waitLine(60 * time.Second)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	u, err := url.Parse(extractURL(line, ""))
	if err != nil || u.Host == "" {
		p.stop(time.Second)
		return fmt.Errorf("%w: dev-mongo printed %q, want mongodb://ADDR/?serverMonitoringMode=poll", ErrProcess, line)
	}
	c.mongo, c.mongoAddr, c.mongoQS = p, u.Host, u.RawQuery
	return nil
}

// replicaSpec says how to start replicas: with --no-lease, with a forge
// token shared by all of them ("": each its own), or with GitHub App auth
// (app: the --github-app-* flags, in place of a token), with the sweeper's
// time budget on (timeBudget: for a simulator that answers as slowly as
// GitHub on the same compressed minute; else --sweep-no-time-budget), and
// extra serve flags.
type replicaSpec struct {
	noLease    bool
	token      string
	app        []string
	timeBudget bool
	extra      []string
}

// startReplicas starts n more replicas and waits until each answers.
func (c *cluster) startReplicas(ctx context.Context, n int, spec replicaSpec) ([]*replica, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		out  []*replica
		errs []error
	)
	for range n {
		c.seq++
		seq := c.seq
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.startReplica(ctx, seq, spec)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out = append(out, r)
		}()
	}
	wg.Wait()
	c.replicas = append(c.replicas, out...)
	if len(errs) > 0 {
		return out, errs[0]
	}
	return out, nil
}

// startReplica starts replica seq of spec on a free loopback port. The
// port freeAddr found may be taken before the replica binds it (another
// replica or forwarder started alongside is given it), so a replica that
// cannot bind is started again on another port, up to bindAttempts
// times; one is ready only once its own log says it listens on its
// address, so another process answering there is never taken for it.
func (c *cluster) startReplica(ctx context.Context, seq int, spec replicaSpec) (*replica, error) {
	for attempt := 1; ; attempt++ {
		r, err := c.startOnce(ctx, seq, spec)
		if !errors.Is(err, errPortTaken) || attempt == bindAttempts {
			return r, err
		}
	}
}

// bindAttempts is how many ports startReplica tries.
const bindAttempts = 3

// errPortTaken is a replica's exit because its port was taken.
var errPortTaken = errors.New("port taken")

func (c *cluster) startReplicaOnce(ctx context.Context, seq int, spec replicaSpec) (*replica, error) {
	fwd, err := newForwarder(c.mongoAddr)
	if err != nil {
		return nil, err
	}
	listen, err := c.listenAddr()
	if err != nil {
		fwd.close()
		return nil, err
	}
	r := &replica{
		name:    fmt.Sprintf("replica-%02d", seq),
		token:   spec.token,
		noLease: spec.noLease,
		fwd:     fwd,
		api:     api{url: "http://" + listen, token: c.apiToken, hc: c.hc},
	}
	if r.token == "" {
		r.token = r.name
	}
	mongoURI := "mongodb://" + fwd.addr() + "/?" + c.mongoQS
	args := []string{"serve",
		"--listen", listen,
		"--mongo-uri", mongoURI,
		"--forge-url", c.sim.url + "/",
		"--api-token", c.apiToken,
		"--sweep-interval", c.interval.String(),
		"--forge-minute", c.interval.String(), // the simulator's minute
	}
	if !spec.timeBudget {
		// The simulator answers at once and the minute is compressed: a
		// pass's time is the machine's, not GitHub's.
		args = append(args, "--sweep-no-time-budget")
	}
	if spec.app != nil {
		args = append(args, spec.app...)
	} else {
		args = append(args, "--forge-token", r.token)
	}
	if spec.noLease {
		args = append(args, "--no-lease")
	}
	args = append(args, spec.extra...)
	p, err := startProc(c.dir, r.name, c.bins.iterion, args...)
	if err != nil {
		fwd.close()
		return nil, err
	}
	r.p = p
	deadline := time.Now().Add(30 * time.Second)
	listening := `"msg":"listening"` // serve's line once it has bound --listen (its JSON log)
	for !p.logged(listening) || !r.api.ready(ctx) {
		if p.exited() || time.Now().After(deadline) {
			p.stop(time.Second)
			fwd.close()
			if p.logged("address already in use") {
				return nil, fmt.Errorf("%w: %s on %s: %w", ErrProcess, r.name, listen, errPortTaken)
			}
			return nil, fmt.Errorf("%w: %s did not answer /metrics: %s", ErrProcess, r.name, p.tail(5))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.owner, err = r.api.owner(ctx); err != nil || r.owner == "" {
		p.stop(time.Second)
		fwd.close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s named no owner on /healthz: %w", ErrProcess, r.name, err)
		}
		return nil, fmt.Errorf("%w: %s named no owner on /healthz", ErrProcess, r.name)
	}
	return r, nil
}

// stopReplica sends sig to r, waits for it to exit (killing it after a
// grace period) and forgets it.
func (c *cluster) stopReplica(r *replica, sig syscall.Signal) {
	r.p.signal(sig)
	if !r.p.wait(15 * time.Second) {
		r.p.signal(syscall.SIGKILL)
		r.p.wait(5 * time.Second)
	}
	r.fwd.close()
	for i, x := range c.replicas {
		if x == r {
			c.replicas = append(c.replicas[:i], c.replicas[i+1:]...)
			break
		}
	}
}

// stopAll stops every replica with SIGTERM, in parallel.
func (c *cluster) stopAll() {
	rs := append([]*replica(nil), c.replicas...)
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.p.stop(15 * time.Second)
			r.fwd.close()
		}()
	}
	wg.Wait()
	c.replicas = nil
}

// byToken returns the live replica whose forge token is tok, or nil.
func (c *cluster) byToken(tok string) *replica {
	for _, r := range c.replicas {
		if r.token == tok {
			return r
		}
	}
	return nil
}

// close stops every process the cluster started.
func (c *cluster) close() {
	c.stopAll()
	if c.simProc != nil {
		c.simProc.stop(5 * time.Second)
	}
	if c.mongo != nil {
		c.mongo.stop(10 * time.Second)
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("%w: free port: %w", ErrProcess, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// extractURL returns the first whitespace-separated field of line that looks
// like a URL, or def when there is none.
func extractURL(line, def string) string {
	for _, f := range strings.Fields(line) {
		if strings.Contains(f, "://") {
			return f
		}
	}
	return def
}

// startMongoRetry starts dev-mongo again on its address and directory,
// retrying while the port lingers after the old process exited.
func (c *cluster) startMongoRetry() error {
	var err error
	for range 20 {
		if err = c.startMongo(c.mongoAddr); err == nil {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// tokensOf returns the forge tokens of rs, in order.
func tokensOf(rs []*replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.token
	}
	return out
}

// ttl and retry are the sweeper lease's at the cluster's interval, as
// pkg/server/leases.go derives them.
func (c *cluster) ttl() time.Duration   { return server.MergeGateSweeper().TTL(c.interval) }
func (c *cluster) retry() time.Duration { return server.MergeGateSweeper().Retry(c.interval) }

// leader waits for exactly one live replica to sweep over two intervals,
// with GET /leases?format=json naming that replica's owner as the sweeper
// lease's holder, and returns it.
func (c *cluster) leader(ctx context.Context) (*replica, error) {
	deadline := time.Now().Add(c.ttl() + 4*c.retry() + 10*time.Second)
	prev, err := c.sim.stats(ctx)
	if err != nil {
		return nil, err
	}
	for {
		clock.Sleep(ctx, 2*c.interval)
		st, err := c.sim.stats(ctx)
		if err != nil {
			return nil, err
		}
		before, now := prev.byToken(nil), st.byToken(nil)
		var active []*replica
		for _, r := range c.replicas {
			if now[r.token] > before[r.token] {
				active = append(active, r)
			}
		}
		if len(active) == 1 && c.holds(ctx, active[0]) {
			return active[0], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: want one sweeping replica, got %d", ErrMeasure, len(active))
		}
		prev = st
	}
}

// holds reports whether a live replica's /leases names r's owner as the
// sweeper lease's holder.
func (c *cluster) holds(ctx context.Context, r *replica) bool {
	for _, q := range c.replicas {
		owner, err := q.api.leaseOwner(ctx, server.MergeGateSweeper().Name)
		if err != nil {
			continue
		}
		return owner == r.owner
	}
	return false
}

// writeAppKey writes a fresh RSA key for an App's JWTs (the replicas'
// --github-private-key-file) into dir and returns its path. The simulator
// reads a JWT's issuer, not its signature.
func writeAppKey(dir string) (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("%w: App key: %w", ErrProcess, err)
	}
	path := filepath.Join(dir, "app-key.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("%w: App key: %w", ErrProcess, err)
	}
	return path, nil
}

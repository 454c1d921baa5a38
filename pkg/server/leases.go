package server

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// Lease declares the lease of one elected net: its name, and its TTL and
// campaign retry as multiples of the net's interval, so both follow the
// interval an operator configures. Every lease the server elects is declared
// in this file and listed by Leases, so two nets never share a name by
// accident.
type Lease struct {
	// Name is the lease's name in the store, shared by every replica.
	Name string
	// TTLIntervals is the TTL in intervals of the net.
	TTLIntervals int
	// RetryIntervals is the campaign retry in intervals of the net.
	RetryIntervals int
}

// MergeGateSweeper is the merge-gate sweeper's lease (docs/design.md, decision 5):
// TTL three sweep intervals, retry one interval.
func MergeGateSweeper() Lease {
	return Lease{Name: "merge-gate-sweeper", TTLIntervals: 3, RetryIntervals: 1}
}

// ForgeBoardSync is the forge board issue sync's lease (the second elected
// net, docs/design.md): TTL three sync intervals, retry one interval, as the
// sweeper's.
func ForgeBoardSync() Lease {
	return Lease{Name: "forge-board-sync", TTLIntervals: 3, RetryIntervals: 1}
}

// RunAdopter is App mode's run adopter's lease (adopt.go): TTL three of
// its intervals, retry one, as the sweeper's.
func RunAdopter() Lease {
	return Lease{Name: "merge-gate-adopter", TTLIntervals: 3, RetryIntervals: 1}
}

// MeasureGroup is the lease group a replica runs for measurements only
// (Comparison.MeasureGroupShards): TTL three sweep intervals, retry one, as
// the sweeper's. No production net uses it, so Leases does not list it.
func MeasureGroup() Lease {
	return Lease{Name: "measure-group", TTLIntervals: 3, RetryIntervals: 1}
}

// Leases returns every lease the server elects, one per net. A test pins
// that their names are distinct.
func Leases() []Lease {
	return []Lease{MergeGateSweeper(), ForgeBoardSync(), RunAdopter()}
}

// TTL is the lease's TTL for a net that runs every interval.
func (l Lease) TTL(interval time.Duration) time.Duration {
	return time.Duration(l.TTLIntervals) * interval
}

// Retry is the lease's campaign retry for a net that runs every interval.
func (l Lease) Retry(interval time.Duration) time.Duration {
	return time.Duration(l.RetryIntervals) * interval
}

// shardHolders is the owner of each of the shards of l's lease group that
// hs shows unexpired at now; "" for an unheld shard.
func (l Lease) shardHolders(hs []lease.Holder, shards int, now time.Time) []string {
	for _, g := range lease.Groups(hs, now) {
		if g.Name == l.Name && g.Shards == shards {
			return g.Holders
		}
	}
	return make([]string, shards)
}

// NewOwner returns a fresh owner identity for this process: the host name
// plus a random suffix ("web-7f9c-3a1b2c4d"), so two replicas on one host
// (or a restarted one) never share an owner. It is shown in logs and on
// /leases; Config.Owner "" gets one. A caller that names the replica
// elsewhere too (the forge client's User-Agent) makes it first.
func NewOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "iterion"
	}
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return host + "-" + hex.EncodeToString(b[:])
}

package server_test

import (
	"testing"

	"iterion.dev/iterion/pkg/server"
)

// TestInstallationShardIsStableAndSpread pins InstallationShard's promise:
// the same shard for the same id and shard count in every process and
// release (golden values, FNV-1a 64 of the decimal id mod 64 computed
// apart from the code: a change here moves every installation to
// another shard mid-deployment), always within 0..shards-1, and 1,000
// installations spread over 64 shards with none holding more than twice
// the mean.
func TestInstallationShardIsStableAndSpread(t *testing.T) {
	for _, c := range []struct {
		id     int64
		shards int
		want   int
	}{
		{1, 64, 60}, {2, 64, 21}, {1000, 64, 36}, {123456789, 64, 60},
		{7, 1, 0}, {7, 0, 0},
	} {
		if got := server.InstallationShard(c.id, c.shards); got != c.want {
			t.Errorf("InstallationShard(%d, %d) = %d, want %d: the shard of an installation never changes", c.id, c.shards, got, c.want)
		}
	}
	const n, shards = 1000, 64
	per := make([]int, shards)
	for id := int64(1); id <= n; id++ {
		s := server.InstallationShard(id, shards)
		if s < 0 || s >= shards {
			t.Fatalf("InstallationShard(%d, %d) = %d, want 0..%d", id, shards, s, shards-1)
		}
		per[s]++
	}
	for s, k := range per {
		if k == 0 || k > 2*n/shards {
			t.Errorf("shard %d holds %d of %d installations, want 1 to %d: installations spread over the shards", s, k, n, 2*n/shards)
		}
	}
}

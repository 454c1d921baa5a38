package harness

import (
	"fmt"
	"strings"
	"time"
)

// tenantsMarkdown renders the tenants scenario: a row per replica count's
// steady state, then its goals, each with what was measured.
func tenantsMarkdown(t TenantsResult) string {
	var b strings.Builder
	shards := "serve's default"
	if t.Shards > 0 {
		shards = fmt.Sprint(t.Shards)
	}
	fmt.Fprintf(&b, "**Many installations.** One GitHub App installed %d times (`forge-sim --installations %d --repos-per-installation 1 --latency`), "+
		"%d open runs each, seeded through the simulator's control API and, the first through `POST /api/runs`, the rest written to the store as it stored that one (the documents compared); replicas in App mode (`--github-app-id`, "+
		"`--github-private-key-file`, no `--github-installation-id`; `--sweep-shards` %s) at sweep interval %v, the simulator's minute "+
		"(its latency model and secondary limits compressed alike; sweep TTL %v, retry %v). Every figure comes from the simulator's own "+
		"request log (`GET /_sim/installations/requests`): each installation's requests by sender, the replica naming itself and its lane "+
		"in its User-Agent (`iterion (<owner>) lane/merge-gate-sweeper`), per interval with the first and last arrival on the simulator's clock. "+
		"Each replica count is measured over whole intervals once every installation is swept by one replica, the same over two stretches of %d intervals running.\n\n",
		t.Installations, t.Installations, t.RunsPer, shards, t.Interval, t.TTL, t.Retry, settleHalf)
	b.WriteString("| replicas | settled after | window | installations swept | sweep requests/hour per installation | replicas sweeping | busiest ÷ mean | longest gap | overlaps | rate-limit refusals |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range t.Rows {
		settled := r.SettleAfter.Round(time.Millisecond).String()
		if !r.Settled {
			settled = "did not settle"
		}
		fmt.Fprintf(&b, "| %d | %s | %v | %d | %.1f | %d | %.2f | %v (installation %d) | %d | %d |\n", r.Replicas, settled, r.Window,
			r.Installations, r.PerHour(t.Interval), r.Sweepers, r.Balance, r.LongestGap.Round(time.Millisecond), r.GapInstallation, r.Overlaps, r.Limited)
	}
	b.WriteString("\nAt the largest replica count, after its window: installations added (the simulator sends the `installation` " +
		"webhook to the first replica, then each one's first run is posted and the rest written to the store as seeding wrote them) and as many removed, a signed `pull_request` webhook naming an " +
		"installation the replicas were never told of, and SIGKILL of the last replica. An overlap is two replicas' tenures of one " +
		"installation sharing an instant, a tenure running from a replica's first sweep request to its last with no pause over a TTL.\n\n")
	b.WriteString("| goal | measured | met |\n|:---|:---|:---|\n")
	for _, g := range t.Goals() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Goal, g.Measured, yesNo(g.Met))
	}
	b.WriteString("\n")
	return b.String()
}

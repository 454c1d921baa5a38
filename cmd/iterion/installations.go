package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"iterion.dev/iterion/internal/page"
	"iterion.dev/iterion/pkg/server"
)

// runInstallations prints a server's view of its GitHub App's
// installations.
func runInstallations(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return installations(ctx, args, os.Getenv, http.DefaultClient, stdout, stderr)
}

// installationsHelp is installations' -h.
var installationsHelp = help{
	usage: "iterion installations --server URL [--token T | --token-file F] [--sort budget|id] [--limit N] [--json]",
	about: "Lists the installations of the GitHub App a server serves, from its\n" +
		"GET /api/installations: each one's ID, account, sweeper shard, the replica\n" +
		"holding that shard's lease (none: nothing sweeps it now; suspended: GitHub\n" +
		"suspended the installation, and its runs wait), its last complete sweep\n" +
		"pass, its core and GraphQL budgets left, its open runs and, of them, those\n" +
		"no installation covers (uncovered); the lowest budget first, suspended\n" +
		"installations last, unless --sort id. Any replica answers alike, but for a suspension it has not heard of\n" +
		"yet (it hears at its next hourly list). The token\n" +
		"is the server's pages token or its API token.",
	example: "iterion installations --server https://iterion.internal --token-file /run/secrets/pages-token --limit 20\n",
}

// installationsTimeout bounds each request to the server.
const installationsTimeout = 30 * time.Second

// installations is runInstallations with its environment, HTTP client and
// output as arguments.
func installations(ctx context.Context, args []string, getenv func(string) string, client *http.Client, stdout, stderr io.Writer) error {
	fs := newFlagSet("installations", installationsHelp, stderr)
	base := fs.String("server", getenv("ITERION_SERVER"), "the server's base URL, http(s)://host[:port] [$ITERION_SERVER]")
	token := fs.String("token", getenv("ITERION_PAGES_TOKEN"), "the server's pages token or API token [$ITERION_PAGES_TOKEN]")
	tokenFile := fs.String("token-file", getenv("ITERION_PAGES_TOKEN_FILE"), "file holding the token (instead of --token) [$ITERION_PAGES_TOKEN_FILE]")
	sort := fs.String("sort", server.SortBudget, "order: budget (the lowest budget first) or id")
	limit := fs.Int("limit", 0, "print at most N installations; 0: every one")
	asJSON := fs.Bool("json", false, `print the server's JSON, its pages joined: {"as_of", "shards", "installations": [...], "next": ""}`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	u, err := url.Parse(*base)
	switch {
	case *base == "":
		return usageError{errors.New("--server (ITERION_SERVER) is required: the base URL of an iterion serve replica")}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return usageError{fmt.Errorf("--server %q is not an http(s) URL such as https://iterion.internal", *base)}
	case *sort != server.SortBudget && *sort != server.SortID:
		return usageError{fmt.Errorf("--sort %q is not budget or id", *sort)}
	case *limit < 0:
		return usageError{fmt.Errorf("--limit %d is negative", *limit)}
	case *token != "" && *tokenFile != "":
		return usageError{errors.New("--token (ITERION_PAGES_TOKEN) and --token-file (ITERION_PAGES_TOKEN_FILE) are both set: choose one")}
	}
	if *tokenFile != "" {
		if *token, err = readSecretFile(*tokenFile); err != nil {
			return usageError{fmt.Errorf("--token-file: %w", err)}
		}
	}
	all, err := fetchInstallations(ctx, client, u, *token, *sort, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	return printInstallations(stdout, all)
}

// fetchInstallations reads GET /api/installations from base, following
// next until the last page or limit installations (0: no limit), and
// returns them as one answer (Next "" unless limit cut it).
func fetchInstallations(ctx context.Context, client *http.Client, base *url.URL, token, sort string, limit int) (server.Installations, error) {
	var all server.Installations
	cursor := ""
	for first := true; first || cursor != ""; first = false {
		q := url.Values{"sort": {sort}}
		if limit > 0 {
			q.Set("limit", strconv.Itoa(min(limit-len(all.Installations), server.MaxInstallationsLimit)))
		} else {
			q.Set("limit", strconv.Itoa(server.MaxInstallationsLimit))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page, err := getInstallationsPage(ctx, client, base.JoinPath("api", "installations").String()+"?"+q.Encode(), token)
		if err != nil {
			return all, err
		}
		if first {
			all = page
		} else {
			all.Installations = append(all.Installations, page.Installations...)
			all.Next = page.Next
		}
		cursor = page.Next
		if limit > 0 && len(all.Installations) >= limit {
			break
		}
	}
	if all.Installations == nil {
		all.Installations = []server.InstallationView{}
	}
	return all, nil
}

// getInstallationsPage GETs one page at u; an answer other than 200 is an
// error that says what to do about it, with the server's own message.
func getInstallationsPage(ctx context.Context, client *http.Client, u, token string) (server.Installations, error) {
	ctx, cancel := context.WithTimeout(ctx, installationsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return server.Installations{}, fmt.Errorf("GET %s: %w", u, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return server.Installations{}, fmt.Errorf("the server did not answer: %w", err) // err names the URL
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return server.Installations{}, fmt.Errorf("GET %s: read the answer: %w", u, err)
	}
	var answer struct {
		server.Installations
		Error string `json:"error"`
	}
	jerr := json.Unmarshal(body, &answer)
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return server.Installations{}, fmt.Errorf("GET %s: 401: the server refused the token: give its pages token or API token with --token or --token-file", u)
	case resp.StatusCode == http.StatusNotFound && answer.Error != "":
		return server.Installations{}, fmt.Errorf("GET %s: 404: %s", u, answer.Error)
	case resp.StatusCode == http.StatusNotFound:
		return server.Installations{}, fmt.Errorf("GET %s: 404: no such endpoint: is --server an iterion server of this release?", u)
	case resp.StatusCode != http.StatusOK && answer.Error != "":
		return server.Installations{}, fmt.Errorf("GET %s: %s: %s", u, resp.Status, answer.Error)
	case resp.StatusCode != http.StatusOK:
		return server.Installations{}, fmt.Errorf("GET %s: %s", u, resp.Status)
	case jerr != nil:
		return server.Installations{}, fmt.Errorf("GET %s: the answer is not the installations JSON: %w", u, jerr)
	}
	return answer.Installations, nil
}

// printInstallations writes the table: a line of totals, then one row per
// installation, instants relative to the server's as_of; a suspended
// installation says so, and since when, in place of its holder.
func printInstallations(w io.Writer, in server.Installations) error {
	fmt.Fprintf(w, "%d installation%s shown, %d shards, as of %s\n", len(in.Installations), plural(len(in.Installations)), in.Shards, page.Stamp(in.AsOf))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tSHARD\tHOLDER\tLAST PASS\tCORE\tGRAPHQL\tRUNS OPEN\tUNCOVERED")
	for _, v := range in.Installations {
		holder := cmp.Or(v.Holder, "none")
		if v.HeldByMe {
			holder += " (this server)"
		}
		if v.Suspended {
			holder = "suspended"
			if v.SuspendedAt != nil {
				holder += " " + page.Relative(*v.SuspendedAt, in.AsOf)
			}
		}
		last := "never"
		if v.LastPass != nil {
			last = page.Relative(*v.LastPass, in.AsOf)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", v.ID, v.Account, v.Shard, holder, last,
			orUnknown(v.CoreRemaining), orUnknown(v.GraphQLRemaining), v.RunsOpen, v.RunsUncovered)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if in.Next != "" {
		fmt.Fprintln(w, "more installations follow: raise --limit, or 0 for every one")
	}
	return nil
}

// orUnknown is a budget figure, "?" when the server knows none.
func orUnknown(n *int) string {
	if n == nil {
		return "?"
	}
	return strconv.Itoa(*n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

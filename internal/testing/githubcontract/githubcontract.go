// Package githubcontract holds GitHub's own published material that the
// project's tests check against, vendored as pinned subsets
// (testdata/README.md names each package, version and checksum): the REST
// operations the forge client calls, from GitHub's OpenAPI description;
// GitHub's public GraphQL schema; and recorded webhook payloads. Its tests
// validate the forge simulator's answers against them; the server's tests
// post the payloads. It is for tests only.
package githubcontract

import (
	"embed"
	"fmt"
)

//go:embed testdata/webhooks/*.json
var webhooks embed.FS

// Payload returns GitHub's recorded example payload of event and action
// ("pull_request", "opened"; action "" for an event without one, such as
// status), as octokit/webhooks recorded it. An example not vendored is an
// error naming it.
func Payload(event, action string) ([]byte, error) {
	name := event
	if action != "" {
		name += "." + action
	}
	b, err := webhooks.ReadFile("testdata/webhooks/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("githubcontract: no recorded payload %s: %w", name, err)
	}
	return b, nil
}

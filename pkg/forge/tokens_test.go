package forge_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/tokenstest"
)

// TestMemoryTokenStoreConformance runs the TokenStore conformance suite on
// the zero MemoryTokenStore.
func TestMemoryTokenStoreConformance(t *testing.T) {
	tokenstest.Run(t, func(*testing.T) forge.TokenStore { return new(forge.MemoryTokenStore) })
}

// TestAnInstallationTokenPrintedOrLoggedShowsNoSecret pins that an
// InstallationToken printed with any verb, or logged as an attribute by
// either of slog's handlers (serve logs JSON), names its installation and
// never carries its token.
func TestAnInstallationTokenPrintedOrLoggedShowsNoSecret(t *testing.T) {
	tok := forge.InstallationToken{Installation: 7, Token: "ghs_secret", ExpiresAt: time.Date(2026, 9, 30, 10, 0, 0, 0, time.UTC), MintedBy: "web-1"}
	var jsonLog, textLog bytes.Buffer
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("minted", "token", tok)
	slog.New(slog.NewTextHandler(&textLog, nil)).Info("minted", "token", tok)
	for where, text := range map[string]string{
		"%v": fmt.Sprintf("%v", tok), "%+v": fmt.Sprintf("%+v", tok), "%#v": fmt.Sprintf("%#v", tok), "%s": fmt.Sprintf("%s", tok),
		"a JSON log": jsonLog.String(), "a text log": textLog.String(),
	} {
		if strings.Contains(text, "ghs_secret") || !strings.Contains(text, "installation 7") {
			t.Errorf("%s: %q, want installation 7 named and no token", where, text)
		}
	}
}

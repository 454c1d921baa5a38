package forge_test

import (
	"testing"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/tokenstest"
)

// TestMemoryTokenStoreConformance runs the TokenStore conformance suite on
// the zero MemoryTokenStore.
func TestMemoryTokenStoreConformance(t *testing.T) {
	tokenstest.Run(t, func(*testing.T) forge.TokenStore { return new(forge.MemoryTokenStore) })
}

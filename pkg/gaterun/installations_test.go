package gaterun_test

import (
	"context"
	"testing"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/gaterun/gateruntest"
)

func TestMemoryInstallationStoreConformance(t *testing.T) {
	gateruntest.RunInstallations(t, func(*testing.T) gaterun.InstallationStore { return gaterun.NewMemoryStore() })
}

func TestMongoInstallationStoreConformance(t *testing.T) {
	gateruntest.RunInstallations(t, func(t *testing.T) gaterun.InstallationStore {
		s, err := gaterun.NewMongoStore(context.Background(), mongotest.DB(t))
		if err != nil {
			t.Fatalf("NewMongoStore: %v", err)
		}
		return s
	})
}

package memstore_test

import (
	"testing"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
	"github.com/delayq/delayq/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		Open: func(*testing.T) store.Store { return memstore.New() },
		OpenRetaining: func(_ *testing.T, r store.Retention) store.Store {
			return memstore.Open(memstore.Options{Retention: r})
		},
	})
}

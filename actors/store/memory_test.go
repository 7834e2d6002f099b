package store_test

import (
	"testing"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

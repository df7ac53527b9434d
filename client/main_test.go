package client

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind:
// consumers, keepers and retries must all stop with their callers.
func TestMain(m *testing.M) {
	code := m.Run()
	// Keep-alive connections of the shared transport are not leaks.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

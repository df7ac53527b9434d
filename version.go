package delayq

import (
	_ "embed"
	"strings"
)

// versionFile is the VERSION file at the repository root, the one place
// the release version is written down (see CHANGELOG.md). Embedding it,
// rather than stamping it with -ldflags, makes every build from source
// (go build, go install, go run) carry it with no build script.
//
//go:embed VERSION
var versionFile string

// Version is the semantic version of this source tree, "v" followed by
// MAJOR.MINOR.PATCH, as the VERSION file says. `delayq --version` and the
// delayq_build_info metric report it (internal/buildinfo).
var Version = strings.TrimSpace(versionFile)

// Package buildinfo says which delayq a binary is: the release version of
// its source tree (the repository's VERSION file, delayq.Version) and the
// commit it was built from, as the Go toolchain recorded it. An
// operator reporting a bug, or comparing the instances of a deployment,
// needs this without access to the build, so it is printed by
// `delayq --version` and exported as the delayq_build_info metric.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/delayq/delayq"
)

// unknown stands for a field the build did not record (go run, a test
// binary, a build outside version control).
const unknown = "unknown"

// Info is what the toolchain recorded about this build.
type Info struct {
	Version   string // release version: VERSION file or a release stamp, e.g. v0.9.0
	Revision  string // VCS commit, or "unknown"
	Time      string // commit time (RFC 3339), or "unknown"
	Modified  bool   // the work tree had uncommitted changes
	GoVersion string // toolchain, e.g. go1.26.8
}

// Stamped by a release build (scripts/release.sh) with
//
//	-ldflags "-X github.com/delayq/delayq/internal/buildinfo.version=v1.2.0 ..."
//
// They win over what the toolchain recorded, and the version over the
// VERSION file: a release may be built where VCS stamping is off
// (GOFLAGS=-buildvcs=false, a tarball), and a release script may name a
// build more exactly than the file (git describe's v0.9.0-3-g0a1b2c3).
var (
	version    string // e.g. v1.2.0, or git describe's v1.2.0-3-g0a1b2c3
	revision   string // full commit hash
	commitTime string // commit time, RFC 3339
	modified   string // "true" when built from a tree with uncommitted changes
)

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return stamp(fromSource(from(bi), delayq.Version), version, revision, commitTime, modified)
}

// fromSource sets the version to the source tree's (the VERSION file)
// when there is one. The toolchain's module version is no use here: a
// build from a checkout records "(devel)" or a v0.0.0 pseudo-version,
// which says nothing a user can pin; the commit stays in Revision.
func fromSource(i Info, v string) Info {
	if v != "" {
		i.Version = v
	}
	return i
}

// stamp overrides i with the release build's -X values that are set.
func stamp(i Info, version, revision, time, modified string) Info {
	if version != "" {
		i.Version = version
	}
	if revision != "" {
		i.Revision = revision
		i.Modified = modified == "true"
	}
	if time != "" {
		i.Time = time
	}
	return i
}

// from extracts Info from what debug.ReadBuildInfo returned (nil when the
// binary carries none), filling what is missing with "unknown".
func from(bi *debug.BuildInfo) Info {
	i := Info{Version: unknown, Revision: unknown, Time: unknown, GoVersion: runtime.Version()}
	if bi == nil {
		return i
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// String is the one-line form `delayq --version` prints:
//
//	delayq v1.2.0 (revision 0a1b2c3d4e5f, 2026-11-24T00:00:00Z) go1.26.8
//
// with ", modified" after the time when the tree had uncommitted changes,
// and "(devel, revision unknown, ...)" when no commit was recorded (go
// run, a tarball build): the version alone would pass it for a release.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("delayq " + i.Version + " (")
	if i.Revision == unknown {
		b.WriteString("devel, ")
	}
	fmt.Fprintf(&b, "revision %s, %s", short(i.Revision), i.Time)
	if i.Modified {
		b.WriteString(", modified")
	}
	fmt.Fprintf(&b, ") %s", i.GoVersion)
	return b.String()
}

// short cuts a commit hash to the 12 characters people paste.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

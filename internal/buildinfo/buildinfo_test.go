package buildinfo

import (
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromRecordedBuild(t *testing.T) {
	got := from(&debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/delayq/delayq", Version: "v1.2.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"},
			{Key: "vcs.time", Value: "2026-11-24T00:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	})
	want := Info{Version: "v1.2.0", Revision: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567", Time: "2026-11-24T00:00:00Z", Modified: true, GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("from() = %+v, want %+v", got, want)
	}
	if s, want := got.String(), "delayq v1.2.0 (revision 0a1b2c3d4e5f, 2026-11-24T00:00:00Z, modified) go1.26.8"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}

// A binary built without module or VCS information (go run, a test
// binary, a tarball build) still says what it can, never an empty field.
func TestFromMissingBuild(t *testing.T) {
	want := Info{Version: unknown, Revision: unknown, Time: unknown, GoVersion: runtime.Version()}
	if got := from(nil); got != want {
		t.Errorf("from(nil) = %+v, want %+v", got, want)
	}
	if got := from(&debug.BuildInfo{}); got != want {
		t.Errorf("from(empty) = %+v, want %+v", got, want)
	}
	if s, want := from(nil).String(), "delayq unknown (devel, revision unknown, unknown) "+runtime.Version(); s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}

func TestReadNeverEmpty(t *testing.T) {
	i := Read()
	if i.Version == "" || i.Revision == "" || i.Time == "" || i.GoVersion == "" {
		t.Errorf("Read() = %+v, want every field set", i)
	}
}

// A release build's -X values win over the toolchain's record, field by
// field; the ones not given keep it.
func TestStamp(t *testing.T) {
	recorded := Info{Version: "(devel)", Revision: unknown, Time: unknown, Modified: true, GoVersion: "go1.26.8"}
	got := stamp(recorded, "v1.2.0", "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567", "2026-11-24T00:00:00Z", "false")
	want := Info{Version: "v1.2.0", Revision: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567", Time: "2026-11-24T00:00:00Z", GoVersion: "go1.26.8"}
	if got != want {
		t.Errorf("stamp() = %+v, want %+v", got, want)
	}
	if got := stamp(recorded, "", "", "", ""); got != recorded {
		t.Errorf("stamp() with nothing stamped = %+v, want the record %+v", got, recorded)
	}
}

// versionFile is the repository's VERSION file, read as a user would.
func versionFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A build from source (this test binary is one: no -ldflags stamp, no VCS
// record) says the VERSION file's version, and marks itself as a
// development build or names its commit.
func TestVersionFromFile(t *testing.T) {
	v := versionFile(t)
	i := Read()
	if i.Version != v {
		t.Errorf("Read().Version = %q, want the VERSION file's %q", i.Version, v)
	}
	s := i.String()
	if !strings.HasPrefix(s, "delayq "+v+" (") {
		t.Errorf("--version prints %q, want it to start with %q", s, "delayq "+v+" (")
	}
	if !strings.Contains(s, "(devel, revision unknown") && !regexp.MustCompile(`\(revision [0-9a-f]{12}, `).MatchString(s) {
		t.Errorf("--version prints %q, want a commit or the devel marker", s)
	}
}

// semver is what a user pins: v, then MAJOR.MINOR.PATCH without leading
// zeros (semver.org), with an optional pre-release.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func TestVersionFileIsSemver(t *testing.T) {
	if v := versionFile(t); !semver.MatchString(v) {
		t.Errorf("VERSION holds %q, want a semantic version such as v0.9.0", v)
	}
	for _, bad := range []string{"", "0.9.0", "v0.9", "v01.9.0", "v0.9.0 ", "v0.9.0\nv1"} {
		if semver.MatchString(bad) {
			t.Errorf("semver accepts %q", bad)
		}
	}
}

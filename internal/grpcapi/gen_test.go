package grpcapi

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/auth"
)

// TestGeneratedCodeIsCurrent regenerates the protobuf API's Go code with
// scripts/gen-proto.sh (buf from npm, the Go plugins at go.mod's pinned
// versions) into a temporary directory and compares it with api/gen, file
// by file: an edit of proto/delayq/v1/delayq.proto without regenerating
// fails here. It needs npm; without it the test skips, except under
// CI=true (scripts/deps.sh installs npm there).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("npm is missing under CI=true; scripts/deps.sh installs it")
		}
		t.Skip("npm is missing (bash scripts/deps.sh installs it): cannot fetch buf to regenerate the protobuf code")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(root, "scripts", "gen-proto.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/gen-proto.sh: %v\n%s", err, b)
	}
	checked := filepath.Join(root, "api", "gen")
	want, got := readTree(t, checked), readTree(t, out)
	for name, b := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("api/gen/%s is missing: run bash scripts/gen-proto.sh and commit it", name)
		} else if !bytes.Equal(w, b) {
			t.Errorf("api/gen/%s differs from what scripts/gen-proto.sh generates from proto/: run it and commit the result", name)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("api/gen/%s is not generated from proto/ any more: delete it (scripts/gen-proto.sh does)", name)
		}
	}
}

// readTree reads every file under dir, by slash-separated relative name.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestEveryMethodHasAnOp: every method of DelayQService maps to an
// operation auth's scope table knows (so none is served unchecked or
// refused for want of an entry), and the map names no method the service
// lacks; the audited methods are methods too.
func TestEveryMethodHasAnOp(t *testing.T) {
	methods := delayqv1.File_delayq_v1_delayq_proto.Services().ByName("DelayQService").Methods()
	names := map[string]bool{}
	for i := range methods.Len() {
		m := methods.Get(i)
		proc := "/delayq.v1.DelayQService/" + string(m.Name())
		names[proc] = true
		op, ok := ops[proc]
		if !ok {
			t.Errorf("method %s has no operation in ops (rules.go)", m.Name())
			continue
		}
		if _, ok := auth.NeedOf(op); !ok {
			t.Errorf("method %s maps to %q, which auth's scope table does not know", m.Name(), op)
		}
		if m.IsStreamingClient() || m.IsStreamingServer() {
			t.Errorf("method %s streams; the interceptor handles unary calls only", m.Name())
		}
	}
	for proc := range ops {
		if !names[proc] {
			t.Errorf("ops names %s, which the service does not have", proc)
		}
	}
	for proc := range audits {
		if !names[proc] {
			t.Errorf("audits names %s, which the service does not have", proc)
		}
	}
	if !strings.HasPrefix(string(methods.Get(0).FullName()), "delayq.v1.DelayQService.") {
		t.Errorf("service is %s, want delayq.v1.DelayQService", methods.Get(0).FullName())
	}
}

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delayq/delayq/internal/auth"
)

// tokenFrom returns the token line of `delayq token add`'s output.
func tokenFrom(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "dq_") {
			return l
		}
	}
	t.Fatalf("no token in %q", out)
	return ""
}

// add writes an entry the server's parser accepts and whose token
// authenticates with the asked scopes; list shows it without the hash;
// remove takes it out again.
func TestTokenAddListRemove(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens.json")
	tok := tokenFrom(t, mustRun(t, "token", "add", "shop", "-s", "produce,read", "-t", "order*", "--file", path))
	mustRun(t, "token", "add", "ops", "--scopes", "admin", "--file", path)

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(tok)) {
		t.Fatal("the file holds the token itself")
	}
	s, err := auth.Load(path, "")
	if err != nil {
		t.Fatalf("the server's loader refuses the file: %v", err)
	}
	if p := s.ByToken(tok); p == nil || !p.Allows(auth.Produce, "orders") || !p.Allows(auth.Read, "orders") || p.Allows(auth.Produce, "mail") || p.Allows(auth.Consume, "orders") {
		t.Fatalf("the token does not grant what was asked: %+v", p)
	}

	list := mustRun(t, "token", "list", "--file", path)
	if !strings.Contains(list, "shop") || !strings.Contains(list, "produce,read") || !strings.Contains(list, "order*") || !strings.Contains(list, "ops") {
		t.Fatalf("list:\n%s", list)
	}
	if strings.Contains(list, tok) || strings.Contains(list, auth.HashToken(tok)) {
		t.Fatalf("list shows a secret:\n%s", list)
	}

	mustRun(t, "token", "remove", "shop", "--file", path)
	if list := mustRun(t, "token", "list", "--file", path); strings.Contains(list, "shop") || !strings.Contains(list, "ops") {
		t.Fatalf("after remove:\n%s", list)
	}
	if s, err := auth.Load(path, ""); err != nil || s.ByToken(tok) != nil || s.Len() != 1 {
		t.Fatalf("after remove: err %v, %d entries", err, s.Len())
	}
	if code, _, errOut := run(t, "token", "remove", "shop", "--file", path); code == 0 || !strings.Contains(errOut, `"shop"`) {
		t.Fatalf("removing an absent entry: exit %d, %q", code, errOut)
	}
}

// A second add of a name, and an add to a file that does not parse, fail
// and leave the file byte for byte as it was.
func TestTokenAddRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	mustRun(t, "token", "add", "shop", "-s", "produce", "--file", path)
	before, _ := os.ReadFile(path)
	if code, _, errOut := run(t, "token", "add", "shop", "-s", "admin", "--file", path); code == 0 || !strings.Contains(errOut, `"shop"`) {
		t.Fatalf("duplicate add: exit %d, %q", code, errOut)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatalf("a refused add changed the file:\n%s", after)
	}

	bad := filepath.Join(dir, "bad.json")
	badText := []byte(`{"tokens": [{"name": "x", "sha256": "not-a-hash", "scopes": ["read"]}]}`)
	if err := os.WriteFile(bad, badText, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := run(t, "token", "add", "y", "-s", "read", "--file", bad); code == 0 {
		t.Fatal("add to a file that does not parse succeeded")
	}
	if after, _ := os.ReadFile(bad); !bytes.Equal(badText, after) {
		t.Fatalf("a refused add changed the file:\n%s", after)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

// A new file is 0600; an existing file keeps its mode through add and
// remove.
func TestTokenFileMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.json")
	mustRun(t, "token", "add", "a", "-s", "read", "--file", fresh)
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v, %v", st.Mode(), err)
	}
	shared := filepath.Join(dir, "shared.json")
	if err := os.WriteFile(shared, []byte(`{"tokens": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	mustRun(t, "token", "add", "a", "-s", "read", "--file", shared)
	mustRun(t, "token", "add", "b", "-s", "read", "--file", shared)
	mustRun(t, "token", "remove", "a", "--file", shared)
	if st, err := os.Stat(shared); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("existing 0640 file: %v, %v", st.Mode(), err)
	}
}

// When the new file cannot be written (a directory the user may not
// write to), the command fails and the old file is intact.
func TestTokenWriteFailureKeepsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	mustRun(t, "token", "add", "shop", "-s", "produce", "--file", path)
	before, _ := os.ReadFile(path)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	var code int
	var errOut string
	if os.Geteuid() != 0 {
		var out, eb bytes.Buffer
		code = Main(t.Context(), []string{"token", "add", "ops", "-s", "admin", "--file", path}, &out, &eb)
		errOut = eb.String()
	} else {
		// root writes anywhere: run the command as nobody, for whom the
		// directory is read-only.
		// The test binary sits in a directory only root may enter: run a
		// copy from one nobody may.
		bin := t.TempDir()
		for _, d := range []string{filepath.Dir(dir), bin} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		before, _ = os.ReadFile(path)
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		exe, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(bin, "delayq")
		if err := os.WriteFile(copied, exe, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(copied, "token", "add", "ops", "-s", "admin", "--file", path)
		cmd.Env = append(os.Environ(), asDelayq+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var eb bytes.Buffer
		cmd.Stderr = &eb
		err = cmd.Run()
		if err == nil {
			code = 0
		} else if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			t.Skipf("cannot run as nobody: %v", err)
		}
		errOut = eb.String()
	}
	if code == 0 || !strings.Contains(errOut, "unchanged") {
		t.Fatalf("add into a read-only directory: exit %d, %q", code, errOut)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatalf("a failed write changed the file:\n%s", after)
	}
}

package cli

import (
	"os"
	"strings"
	"testing"
)

// hardPasswords are passwords that make a Redis URL unparseable, each of
// which --check and the start error printed in clear before.
var hardPasswords = []string{"pa%ss", "pa#ss", "pa/ss", "pa ss"}

// TestCheckAndStartErrorMaskHardPasswords: serve --check, and the error
// of a start that fails, show no Redis password, whatever it holds.
func TestCheckAndStartErrorMaskHardPasswords(t *testing.T) {
	clearServeEnv(t)
	for _, pw := range hardPasswords {
		secret := "Top" + pw + "Secret"
		u := "redis://alice:" + secret + "@127.0.0.1:1/0"
		code, out, errOut := run(t, "serve", "--check", "--redis", u, "--beanstalk-addr", "")
		if strings.Contains(out+errOut, secret) || strings.Contains(out+errOut, "Secret") {
			t.Errorf("serve --check --redis with password %q printed it (exit %d):\n%s%s", pw, code, out, errOut)
		}
		if !strings.Contains(out+errOut, "alice:xxxxx@") {
			t.Errorf("serve --check --redis with password %q: no masked URL in\n%s%s", pw, out, errOut)
		}
	}
}

// TestConfigFileReadableByOthersWarns: a config file that holds a secret
// and that its group or everyone may read draws a WARN naming the key;
// the same file at 0600, or a readable file with no secret, does not.
func TestConfigFileReadableByOthersWarns(t *testing.T) {
	clearServeEnv(t)
	secret := writeFile(t, "redis = \"redis://:hunter2@127.0.0.1:1/0\"\n")
	plain := writeFile(t, "max-body = 1024\n")
	for _, tc := range []struct {
		path string
		mode os.FileMode
		warn bool
	}{{secret, 0o644, true}, {secret, 0o640, true}, {secret, 0o600, false}, {plain, 0o644, false}} {
		if err := os.Chmod(tc.path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, _, errOut := run(t, "serve", "--config", tc.path, "--check", "--beanstalk-addr", "")
		warned := strings.Contains(errOut, "level=WARN") && strings.Contains(errOut, "chmod 600")
		if warned != tc.warn {
			t.Errorf("file %s at %04o: warned %v, want %v:\n%s", tc.path, tc.mode, warned, tc.warn, errOut)
		}
		if tc.warn && !strings.Contains(errOut, "(redis)") {
			t.Errorf("the warning does not name the key: %s", errOut)
		}
		if strings.Contains(errOut, "hunter2") {
			t.Errorf("the password was printed: %s", errOut)
		}
	}
}

// TestConfigTableOneError: a [serve] table gets the one error that says
// tables are not settings, not a second about the keys inside it.
func TestConfigTableOneError(t *testing.T) {
	clearServeEnv(t)
	path := writeFile(t, "[serve]\nmax-wait = \"1m\"\nhttp-addr = \"127.0.0.1:0\"\n")
	code, _, errOut := run(t, "serve", "--config", path, "--beanstalk-addr", "")
	if code != exitUsage || !strings.Contains(errOut, "[serve]: tables are not settings") {
		t.Fatalf("exit %d, stderr %q; want 2 and the table error", code, errOut)
	}
	if n := strings.Count(errOut, path+":"); n != 1 {
		t.Errorf("%d errors for one table, want 1:\n%s", n, errOut)
	}
}

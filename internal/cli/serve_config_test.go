package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// serveNode returns the serve command of a fresh parser and the root it
// fills.
func serveNode(t testing.TB) (*kong.Kong, *kong.Node) {
	t.Helper()
	var cli root
	parser := newParser(&cli, io.Discard, io.Discard)
	for _, n := range parser.Model.Children {
		if n.Name == "serve" {
			return parser, n
		}
	}
	t.Fatal("no serve command in the model")
	return nil, nil
}

// clearServeEnv unsets every DELAYQ_* variable of serve's flags for the
// test, so the machine's environment cannot decide a precedence test.
func clearServeEnv(t *testing.T) {
	t.Helper()
	_, serve := serveNode(t)
	for _, f := range serve.Flags {
		for _, name := range f.Envs {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

// writeFile writes a config file into the test's directory.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "delayq.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseServe parses a serve command line and returns the value each serve
// flag ended with.
func parseServe(t *testing.T, args ...string) (map[string]any, error) {
	t.Helper()
	var cli root
	parser := newParser(&cli, io.Discard, io.Discard)
	kctx, err := parser.Parse(append([]string{"serve"}, args...))
	if err != nil {
		return nil, err
	}
	values := make(map[string]any)
	for _, f := range kctx.Flags() {
		values[f.Name] = f.Target.Interface()
	}
	return values, nil
}

// sample returns, for a flag, a value other than its default as the
// command line spells it and as TOML spells it. A flag of a type it does
// not know fails the test: teach it (and flagText) the new type.
func sample(t *testing.T, f *kong.Flag) (cli, file string) {
	t.Helper()
	if f.Enum != "" {
		for _, e := range slices.Backward(f.EnumSlice()) {
			if e != f.Default {
				return e, fmt.Sprintf("%q", e)
			}
		}
	}
	typ := f.Target.Type()
	if typ == durationType {
		return "7s", `"7s"`
	}
	if textType(typ) {
		// A type that reads its own text: the first of these it takes
		// that is not its default.
		def := reflect.New(typ).Elem()
		_ = checkFlagTextInto(f, f.Default, def)
		for _, text := range []string{"7s", "50ms", "always", "true", "7", "a.example", "127.0.0.2:7"} {
			v := reflect.New(typ).Elem()
			if checkFlagTextInto(f, text, v) == nil && !reflect.DeepEqual(v.Interface(), def.Interface()) {
				return text, fmt.Sprintf("%q", text)
			}
		}
	}
	switch typ.Kind() {
	case reflect.Bool:
		if f.Default == "true" {
			return "false", "false"
		}
		return "true", "true"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "7", "7"
	case reflect.Float32, reflect.Float64:
		return "2.5", "2.5"
	case reflect.String:
		return "127.0.0.2:7", `"127.0.0.2:7"`
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.String {
			return "a.example,b.example", `["a.example", "b.example"]`
		}
	}
	t.Fatalf("flag --%s has type %s: teach sample (and check flagText) how a config file writes it", f.Name, typ)
	return "", ""
}

// TestConfigFileSetsEveryServeFlag walks every flag of `delayq serve` in
// kong's model, so a flag added later is covered without touching this
// test: the file's key of the flag's name must give the flag exactly the
// value the command line gives it, and not the default.
func TestConfigFileSetsEveryServeFlag(t *testing.T) {
	clearServeEnv(t)
	_, serve := serveNode(t)
	defaults, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range serve.Flags {
		if f.Name == configFlagName || f.Name == checkFlagName {
			continue
		}
		n++
		cliText, fileText := sample(t, f)
		fromFlag, err := parseServe(t, "--"+f.Name+"="+cliText)
		if err != nil {
			t.Errorf("--%s=%s: %v", f.Name, cliText, err)
			continue
		}
		path := writeFile(t, fmt.Sprintf("# one key\n%s = %s\n", f.Name, fileText))
		fromFile, err := parseServe(t, "--config", path)
		if err != nil {
			t.Errorf("key %s = %s: %v", f.Name, fileText, err)
			continue
		}
		if !reflect.DeepEqual(fromFile[f.Name], fromFlag[f.Name]) {
			t.Errorf("key %s = %s gave %#v, the flag --%s=%s gives %#v", f.Name, fileText, fromFile[f.Name], f.Name, cliText, fromFlag[f.Name])
		}
		if reflect.DeepEqual(fromFile[f.Name], defaults[f.Name]) {
			t.Errorf("key %s = %s left the default %#v", f.Name, fileText, defaults[f.Name])
		}
	}
	if n < 30 {
		t.Errorf("walked %d serve flags, want every one (30 or more)", n)
	}
}

// TestConfigPrecedence: flag > environment > file > default, through the
// real command line and --check's report of each value's source.
func TestConfigPrecedence(t *testing.T) {
	clearServeEnv(t)
	path := writeFile(t, `
max-body = 1000
max-wait = "2m"
log-level = "warn"
max-topics = 5
`)
	t.Setenv("DELAYQ_MAX_WAIT", "3m")
	t.Setenv("DELAYQ_LOG_LEVEL", "error")
	code, out, errOut := run(t, "serve", "--config", path, "--check", "--log-level=debug", "--data-dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("serve --check: exit %d, stderr %q", code, errOut)
	}
	got := checkValues(out)
	want := map[string]string{
		"max-body":           "1000 # " + path + ":2",        // file > default
		"max-wait":           `"3m0s" # env DELAYQ_MAX_WAIT`, // env > file
		"log-level":          `"debug" # flag`,               // flag > env > file
		"max-topics":         "5 # " + path + ":5",           // file
		"max-reserve-topics": "1000 # default",               // nothing set it
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("--check printed %s = %s, want %s", k, got[k], v)
		}
	}
	if !strings.HasSuffix(got["data-dir"], "# flag") {
		t.Errorf("--check printed data-dir = %s, want it from the flag", got["data-dir"])
	}
}

// checkValues reads --check's output into key → "value # source".
func checkValues(out string) map[string]string {
	got := make(map[string]string)
	space := regexp.MustCompile(`\s+#\s+`)
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, " = ")
		got[k] = space.ReplaceAllString(v, " # ")
	}
	return got
}

// TestConfigFileErrors: every wrong file is refused with exit 2, the
// file's name and line, and the key; nothing starts (the data directory
// is not created).
func TestConfigFileErrors(t *testing.T) {
	clearServeEnv(t)
	cases := []struct {
		name, file string
		line       int
		want       string
	}{
		{"unknown key", "max-body = 10\n\nmax_wait = \"5m\"\n", 3, "max_wait: unknown key (did you mean max-wait?)"},
		{"typo", "# c\nmax-boddy = 10\n", 2, "max-boddy: unknown key (did you mean max-body?)"},
		{"string for int", "max-body = \"10\"\n", 1, `max-body: expected an integer, got the string "10"`},
		{"int for duration", "\nmax-wait = 5\n", 2, `max-wait: expected a duration string`},
		{"bad duration", "max-wait = \"5 minutes\"\n", 1, `max-wait: expected a duration such as 30s`},
		{"string for bool", "insecure-listen = \"yes\"\n", 1, `insecure-listen: expected true or false`},
		{"enum", "log-format = \"xml\"\n", 1, `log-format: "xml" is not one of text, json`},
		{"array for scalar", "http-addr = [\"a\"]\n", 1, "http-addr: expected a string, got an array"},
		{"table", "max-body = 10\n[serve]\nmax-wait = \"1m\"\n", 2, "[serve]: tables are not settings"},
		{"dotted key", "serve.max-body = 10\n", 1, "serve.max-body: dotted keys are not settings"},
		{"syntax", "max-body = 10\nmax-wait = \"1m\n", 2, "strings cannot have new lines"},
		{"duplicate", "max-body = 10\nmax-body = 11\n", 2, "max-body"},
		{"config in config", "config = \"other.toml\"\n", 1, "config: unknown key"},
		{"unknown beside known", "max-body = 10\nmax-body-x = 1\n", 2, "max-body-x: unknown key"},
		{"valid but out of range", "# limits\nmax-body = 0\n", 2, "max-body: 0 is out of range"},
		{"element of array", "allowed-hosts = [\"a\", 3]\n", 1, "allowed-hosts: element 2: expected a string, got the integer 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file)
			dataDir := filepath.Join(t.TempDir(), "data")
			code, out, errOut := run(t, "serve", "--config", path, "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--beanstalk-addr", "")
			where := fmt.Sprintf("%s:%d:", path, tc.line)
			if code != exitUsage || !strings.Contains(errOut, where) || !strings.Contains(errOut, tc.want) {
				t.Errorf("serve --config with %q: exit %d, stderr %q; want 2, %q and %q", tc.file, code, errOut, where, tc.want)
			}
			if strings.Contains(out, "serving") || strings.Contains(errOut, "delayq serving") {
				t.Errorf("a bad config file started the server: %s %s", out, errOut)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("a bad config file created the data directory (stat: %v)", err)
			}
		})
	}
	if code, _, errOut := run(t, "serve", "--config", filepath.Join(t.TempDir(), "missing.toml")); code != exitUsage || !strings.Contains(errOut, "missing.toml") {
		t.Errorf("serve --config of a missing file: exit %d, stderr %q; want 2 naming it", code, errOut)
	}
}

// TestConfigCheckMasksSecrets: --check prints no token, inline auth or
// password, wherever the value came from.
func TestConfigCheckMasksSecrets(t *testing.T) {
	clearServeEnv(t)
	const secretHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	path := writeFile(t, `
redis = "redis://delayq:hunter2@redis.internal:6379/0?addr=redis2.internal:6379"
auth = '{"tokens":[{"name":"ops","sha256":"`+secretHash+`","scopes":["admin"]}]}'
`)
	code, out, errOut := run(t, "serve", "--config", path, "--check")
	if code != exitOK {
		t.Fatalf("serve --check: exit %d, stderr %q", code, errOut)
	}
	for _, secret := range []string{"hunter2", secretHash} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("--check printed the secret %q:\n%s", secret, out)
		}
	}
	got := checkValues(out)
	if want := `"redis://delayq:xxxxx@redis.internal:6379/0?addr=redis2.internal%3A6379" # ` + path + ":2"; got["redis"] != want &&
		got["redis"] != `"redis://delayq:xxxxx@redis.internal:6379/0?addr=redis2.internal:6379" # `+path+":2" {
		t.Errorf("--check printed redis = %s, want the URL with its password masked", got["redis"])
	}
	if got["auth"] != maskedValue+" # "+path+":3" {
		t.Errorf("--check printed auth = %s, want %s", got["auth"], maskedValue)
	}
	// A password in the URL's query, from the environment.
	t.Setenv("DELAYQ_REDIS", "redis://redis.internal:6379/0?password=hunter3")
	_, out, _ = run(t, "serve", "--check")
	if strings.Contains(out, "hunter3") || !strings.Contains(out, "password=xxxxx") {
		t.Errorf("--check printed a query password:\n%s", out)
	}
}

// TestConfigCheckRoundTrip: --check's output is itself a config file
// that gives the same settings.
func TestConfigCheckRoundTrip(t *testing.T) {
	clearServeEnv(t)
	path := writeFile(t, `
http-addr = "127.0.0.1:0"
allowed-hosts = ["a.example", "b,c.example"]
rate-limit = 2
advertise-url = "http://delayq.example:7480"
data-dir = "/var/lib/delayq \"quoted\"\ttab"
max-wait = "90s"
`)
	code, first, errOut := run(t, "serve", "--config", path, "--check")
	if code != exitOK {
		t.Fatalf("serve --check: exit %d, stderr %q", code, errOut)
	}
	again := writeFile(t, first)
	code, second, errOut := run(t, "serve", "--config", again, "--check")
	if code != exitOK {
		t.Fatalf("serve --check of --check's output: exit %d, stderr %q\n%s", code, errOut, first)
	}
	a, b := checkValues(first), checkValues(second)
	for k, v := range a {
		va, _, _ := strings.Cut(v, " # ")
		vb, _, _ := strings.Cut(b[k], " # ")
		if va != vb {
			t.Errorf("%s: %s, then %s from --check's own output", k, va, vb)
		}
	}
	if got := a["allowed-hosts"]; !strings.HasPrefix(got, `["a.example", "b,c.example"]`) {
		t.Errorf("allowed-hosts = %s, want the two hosts, the comma kept", got)
	}
}

// TestExampleConfigFiles checks the config files shipped in the repo with
// --check, as the docs tell an operator to.
func TestExampleConfigFiles(t *testing.T) {
	clearServeEnv(t)
	files, err := filepath.Glob("../../packaging/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example config files in packaging/ (%v)", err)
	}
	more, _ := filepath.Glob("../../packaging/*/*.toml")
	for _, f := range append(files, more...) {
		if strings.Contains(f, "container") {
			// The image listens on every interface: without tokens it
			// must refuse to start, as docs/deploy.md says; with them
			// (as deploy.md runs it) the file is fine.
			code, _, errOut := run(t, "serve", "--config", f, "--check")
			if code != exitUsage || !strings.Contains(errOut, "would refuse to start") || !strings.Contains(errOut, "http-addr") {
				t.Errorf("serve --config %s --check without tokens: exit %d, stderr %q; want 2, a refusal naming http-addr", f, code, errOut)
			}
			t.Setenv("DELAYQ_AUTH", `{"tokens":[{"name":"ops","sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","scopes":["admin"]}]}`)
			code, _, errOut = run(t, "serve", "--config", f, "--check")
			if code != exitUsage || !strings.Contains(errOut, "beanstalk-addr") {
				t.Errorf("serve --config %s --check with tokens only: exit %d, stderr %q; want 2: beanstalkd clients send no token", f, code, errOut)
			}
			t.Setenv("DELAYQ_BEANSTALK_INSECURE_LISTEN", "true")
		}
		code, out, errOut := run(t, "serve", "--config", f, "--check")
		if code != exitOK || !strings.Contains(errOut, "configuration OK") {
			t.Errorf("serve --config %s --check: exit %d, stderr %q", f, code, errOut)
		}
		if !strings.Contains(out, filepath.Base(f)+":") {
			t.Errorf("serve --config %s --check set nothing from the file:\n%s", f, out)
		}
	}
}

// TestServeFromConfigFile runs a real server configured by a file and
// sees the file's max-body enforced.
func TestServeFromConfigFile(t *testing.T) {
	clearServeEnv(t)
	path := writeFile(t, fmt.Sprintf(`
http-addr = "127.0.0.1:0"
beanstalk-addr = ""
data-dir = %q
log-format = "json"
max-body = 4
`, t.TempDir()))
	ctx, stop := context.WithCancel(t.Context())
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, []string{"serve", "--config", path}, &bytes.Buffer{}, logs) }()

	addr := waitForServing(t, logs)
	if code, _, errOut := run(t, "put", "--server", addr, "t", "12345"); code != exitError || !strings.Contains(errOut, "at most 4") {
		t.Errorf("put of 5 bytes with max-body = 4 in the file: exit %d, stderr %q; want 1, at most 4", code, errOut)
	}
	mustRun(t, "put", "--server", addr, "t", "1234")
	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve after its context ended: exit %d, want 0; logs:\n%s", code, logs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running 10s after its context ended")
	}
}

// FuzzConfigFile feeds arbitrary bytes to the file parser with the real
// serve flags: it must never panic, every error must name the file, and
// a file it accepts holds only known keys whose values the flags parse.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		"", "max-body = 10\n", "max-wait = \"5m\"\nlog-level = \"debug\"\n",
		"allowed-hosts = [\"a\", \"b\"]\n", "[x]\ny = 1\n", "a.b.c = 1", "rate-limit = nan\n",
		"max-body = 0x10\n", "tls-cert = '''\nmulti\n'''\n", "insecure-listen = true\n",
		"max-body = 1979-05-27T07:32:00Z\n", "allowed-hosts = [[\"a\"]]\n", "= 1\n", "\"\" = 1\n",
	} {
		f.Add([]byte(seed))
	}
	_, serve := serveNode(f)
	flags := fileFlags(serve)
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := parseConfigFile("fuzz.toml", data, flags)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.toml:") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		for key, e := range cf.entries {
			flag, ok := flags[key]
			if !ok {
				t.Fatalf("accepted unknown key %q", key)
			}
			if err := checkFlagText(flag, e.text); err != nil {
				t.Fatalf("accepted %s = %q that the flag refuses: %v", key, e.text, err)
			}
			if e.line < 1 {
				t.Fatalf("key %s has line %d", key, e.line)
			}
		}
	})
}

// checkFlagTextInto parses text with the flag's mapper into target.
func checkFlagTextInto(f *kong.Flag, text string, target reflect.Value) error {
	scan := kong.ScanFromTokens(kong.Token{Type: kong.FlagValueToken, Value: text})
	return f.Mapper.Decode(&kong.DecodeContext{Value: f.Value, Scan: scan}, target)
}

// TestCheckLoadsTokens: --check reads the auth file as the start would,
// so a broken one fails the check, not the first start.
func TestCheckLoadsTokens(t *testing.T) {
	clearServeEnv(t)
	authFile := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(authFile, []byte(`{"tokens":[{"name":"ops","sha256":"not-a-hash","scopes":["admin"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, fmt.Sprintf("auth-file = %q\n", authFile))
	code, _, errOut := run(t, "serve", "--config", path, "--check")
	if code != exitUsage || !strings.Contains(errOut, "auth") || strings.Contains(errOut, "configuration OK") {
		t.Errorf("--check with a broken auth file: exit %d, stderr %q; want 2 and the auth file's problem", code, errOut)
	}
}

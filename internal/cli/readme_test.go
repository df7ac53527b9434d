package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeCommandLines parses every delayq command line of the README's
// quick start (the `delayq ...` lines of its shell blocks and the CLI
// paragraph's examples) with the real parser, placeholders such as ID and
// TOPIC filled in, so an example cannot name a flag or a command that
// does not exist. TestReadmeQuickStart runs them, from PATH, against a
// server started as the README says.
func TestReadmeCommandLines(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		for _, l := range strings.Split(block[1], "\n") {
			if strings.HasPrefix(l, "delayq ") {
				l, _, _ = strings.Cut(l, "#")
				lines = append(lines, strings.TrimSpace(l))
			}
		}
	}
	start := strings.Index(text, "The command line is a client too")
	if start < 0 {
		t.Fatal("README has no paragraph of CLI examples")
	}
	para, _, _ := strings.Cut(text[start:], "\n\n")
	for _, m := range regexp.MustCompile("`(delayq [^`]+)`").FindAllStringSubmatch(para, -1) {
		lines = append(lines, m[1])
	}
	if len(lines) < 10 {
		t.Fatalf("found %d delayq command lines in the README, want the quick start's (10 or more): %q", len(lines), lines)
	}
	placeholders := strings.NewReplacer("ID1:R1", "a:1-1", "ID2:R2", "b:2-1", " ...", "", "ID", "a", "TOPIC", "t", "--reservation R", "--reservation 1-1")
	for _, line := range lines {
		args := shellWords(placeholders.Replace(line))[1:]
		if err := parseOnly(args); err != nil {
			t.Errorf("README's %q does not parse: %v", line, err)
		}
	}
}

// shellWords splits a command line at spaces, keeping "quoted words".
func shellWords(s string) []string {
	var words []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(s, -1) {
		if m[2] != "" {
			words = append(words, m[2])
		} else {
			words = append(words, m[1])
		}
	}
	return words
}

// parseOnly parses args as Main would, without running the command
// (--help ends the parse as a success).
func parseOnly(args []string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			code, ok := r.(exitPanic)
			if !ok {
				panic(r)
			}
			if code != exitOK {
				err = fmt.Errorf("exit %d", code)
			}
		}
	}()
	var cli root
	_, err = newParser(&cli, io.Discard, io.Discard).Parse(args)
	return err
}

// TestReadmeQuickStart follows the README's quick start as a new user
// does, with the real go command and the installed binary: `go install
// ./cmd/delayq` (into a temporary GOBIN put first on PATH, as the
// README's export line puts GOPATH/bin), `delayq serve` from a fresh
// directory (its store appears in ./delayq-data), then every `delayq ...`
// example of the CLI paragraph, found by name on PATH and run against
// that server in the README's order, its placeholders (ID, R, TOPIC)
// filled from earlier answers. Ports are chosen with DELAYQ_HTTP_ADDR,
// DELAYQ_BEANSTALK_ADDR and DELAYQ_SERVER (the issue's "after choosing
// ports"); the command lines are the README's. TestReadmeCommandLines
// only parses them; this runs them.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the delayq command with the go tool")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	qs, _, _ := strings.Cut(text[strings.Index(text, "## Quick start"):], "```\n\n")
	for _, want := range []string{"\ngo install ./cmd/delayq ", "\nexport PATH=\"$PATH:$(go env GOPATH)/bin\"", "\ndelayq serve\n"} {
		if !strings.Contains(qs, want) {
			t.Fatalf("the README's quick start lacks %q:\n%s", strings.TrimSpace(want), qs)
		}
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	install := exec.Command(goCmd, "install", "./cmd/delayq")
	install.Dir = root
	install.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/delayq: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	delayq, err := exec.LookPath("delayq")
	if err != nil || filepath.Dir(delayq) != bin {
		t.Fatalf("delayq on PATH after go install = %q, %v; want the one in %s", delayq, err, bin)
	}

	// delayq serve, from a fresh directory.
	dir := t.TempDir()
	serve := exec.Command("delayq", "serve")
	serve.Dir = dir
	serve.Env = append(os.Environ(), "DELAYQ_HTTP_ADDR=127.0.0.1:0", "DELAYQ_BEANSTALK_ADDR=127.0.0.1:0", "DELAYQ_LOG_FORMAT=json")
	logs := &lockedBuffer{}
	serve.Stderr = logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("delayq serve after SIGTERM: %v; log:\n%s", err, logs)
			}
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			t.Errorf("delayq serve still running 30s after SIGTERM")
		}
	})
	addr := waitForServing(t, logs)
	if st, err := os.Stat(filepath.Join(dir, "delayq-data")); err != nil || !st.IsDir() {
		t.Errorf("delayq serve made no ./delayq-data in its directory: %v", err)
	}
	t.Setenv("DELAYQ_SERVER", addr)
	sh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("delayq", args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("delayq %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}

	// Three jobs ready now, for the reserves to find (the paragraph's
	// own put is due in 30 minutes).
	for _, body := range []string{"order 46", "order 47", "order 48"} {
		sh("put", "orderclose", body)
	}
	start := strings.Index(text, "The command line is a client too")
	para, _, _ := strings.Cut(text[start:], "\n\n")
	putID := regexp.MustCompile(`put job (\S+) \(seq`)
	field := func(out, name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s in:\n%s", name, out)
		}
		return m[1]
	}
	var delayed string   // the paragraph's put, due in 30 minutes
	var held [][2]string // reserved jobs: id, reservation
	ran := 0
	for _, m := range regexp.MustCompile("`(delayq [^`]+)`").FindAllStringSubmatch(para, -1) {
		line := m[1]
		words := shellWords(strings.ReplaceAll(line, " ...", ""))[1:]
		// fill replaces the placeholder words (whole words only).
		fill := func(kv ...string) []string {
			out := slices.Clone(words)
			for i, w := range out {
				for j := 0; j < len(kv); j += 2 {
					if w == kv[j] {
						out[i] = kv[j+1]
					}
				}
			}
			return out
		}
		switch words[0] {
		case "put":
			out := sh(words...)
			if id := putID.FindStringSubmatch(out); id != nil {
				delayed = id[1]
			} else {
				t.Fatalf("%s printed %q, want put job ID", line, out)
			}
		case "reserve":
			// Reserved once per finish that follows.
			for range 3 {
				out := sh(words...)
				held = append(held, [2]string{field(out, "id"), field(out, "reservation")})
			}
		case "finish":
			if len(held) < 3 {
				t.Fatalf("%s: no jobs reserved before it", line)
			}
			if strings.Contains(line, "ID1:R1") {
				sh(fill("ID1:R1", held[1][0]+":"+held[1][1], "ID2:R2", held[2][0]+":"+held[2][1])...)
			} else {
				sh(fill("ID", held[0][0], "R", held[0][1])...)
			}
		case "get", "update", "delete":
			sh(fill("ID", delayed)...)
		case "list", "kick":
			sh(fill("TOPIC", "orderclose")...)
		case "topics", "stats", "--help":
			sh(words...)
		default:
			t.Fatalf("the README's %q: teach TestReadmeQuickStart how to run it", line)
		}
		ran++
	}
	if ran < 10 {
		t.Fatalf("ran %d examples of the README's CLI paragraph, want all of them (10 or more)", ran)
	}
	// What they did: the three reserved jobs finished, the delayed one
	// deleted.
	for _, h := range held {
		if got := field(sh("get", h[0]), "state"); got != "finished" {
			t.Errorf("job %s finished by the README's finish lines is %s", h[0], got)
		}
	}
	if got := field(sh("get", delayed), "state"); got != "deleted" {
		t.Errorf("job %s deleted by the README's delete line is %s", delayed, got)
	}
}

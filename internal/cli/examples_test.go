package cli

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asDelayq, set to 1, makes this package's test binary run as the delayq
// command (TestMain).
const asDelayq = "DELAYQ_TEST_BINARY_AS_DELAYQ"

// An example of the documentation: one fenced block of README.md or
// docs/*.md.
type example struct {
	file, lang, text string
	line             int    // of the opening fence
	notRun           string // the reason of a <!-- not-run: ... --> mark before it
}

// docExamples returns every sh, console, python and php block of the
// README and docs/*.md, in file order.
func docExamples(t *testing.T) map[string][]example {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	fence := regexp.MustCompile("^```(\\S*)\\s*$")
	mark := regexp.MustCompile(`^<!-- not-run: (.+) -->$`)
	out := map[string][]example{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			m := fence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
				j++
			}
			ex := example{file: filepath.Base(f), lang: m[1], text: strings.Join(lines[i+1:j], "\n"), line: i + 1}
			for k := i - 1; k >= 0 && k >= i-2; k-- {
				if mm := mark.FindStringSubmatch(strings.TrimSpace(lines[k])); mm != nil {
					ex.notRun = mm[1]
				}
			}
			switch ex.lang {
			case "sh", "console", "python", "php":
				out[ex.file] = append(out[ex.file], ex)
			}
			i = j
		}
	}
	return out
}

// A shell command of an example and the output its comment promises.
type shCommand struct {
	cmd, want string
}

// expectedOutput starts the comment lines that show a command's output:
// a JSON answer ("# {...}"), or a protocol reply ("# INSERTED 4").
var expectedOutput = regexp.MustCompile(`^# ([{\[]|[A-Z][A-Z_]+\b)`)

// shCommands splits a shell block into commands (continuation lines
// joined), each with the output its following comment lines show. In a
// console block, lines after a "$ " command up to the next are its output.
func shCommands(text string) []shCommand {
	var cmds []shCommand
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "$ "):
			c := shCommand{cmd: strings.TrimPrefix(l, "$ ")}
			var out []string
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
				i++
				out = append(out, lines[i])
			}
			c.want = strings.Join(out, "\n")
			cmds = append(cmds, c)
		case strings.HasPrefix(l, "#"):
			if expectedOutput.MatchString(l) && len(cmds) > 0 {
				var out []string
				for ; i < len(lines) && strings.HasPrefix(lines[i], "#"); i++ {
					out = append(out, strings.TrimPrefix(lines[i], "#"))
				}
				i--
				cmds[len(cmds)-1].want = strings.Join(out, "\n")
			}
		default:
			c := l
			for strings.HasSuffix(strings.TrimSpace(c), "\\") && i+1 < len(lines) {
				i++
				c = strings.TrimSuffix(strings.TrimSpace(c), "\\") + " " + strings.TrimSpace(lines[i])
			}
			// A multi-line quoted argument (a JSON body over lines).
			for strings.Count(c, "'")%2 == 1 && i+1 < len(lines) {
				i++
				c += "\n" + lines[i]
			}
			cmds = append(cmds, shCommand{cmd: c})
		}
	}
	return cmds
}

// runnable names the programs an example's shell command may start with.
var runnable = map[string]bool{"curl": true, "delayq": true, "printf": true}

// matches reports whether out is what want shows: equal once whitespace
// is dropped (a JSON answer is wrapped over lines in the docs), where
// each "…" stands for any text.
func matches(want, out string) bool {
	strip := func(s string) string { return strings.Join(strings.Fields(s), "") }
	parts := strings.Split(strip(want), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*?") + `$`).MatchString(strip(out))
}

// placeholder is a value the reader fills in from an earlier answer:
// <reservation>, <id>.
var placeholder = regexp.MustCompile(`<([a-z_]+)>`)

// fill replaces each placeholder of cmd with the value of the field of
// that name in the latest output that has one (a JSON field, or a
// "name  value" line of the CLI).
func fill(t *testing.T, cmd string, outputs []string) string {
	t.Helper()
	return placeholder.ReplaceAllStringFunc(cmd, func(p string) string {
		name := p[1 : len(p)-1]
		re := regexp.MustCompile(`"` + name + `":"([^"]*)"|"` + name + `":(\d+)|(?m)^` + name + `\s+(\S+)$`)
		for i := len(outputs) - 1; i >= 0; i-- {
			if m := re.FindStringSubmatch(outputs[i]); m != nil {
				return m[1] + m[2] + m[3]
			}
		}
		t.Fatalf("%s in %q: no earlier answer has a field %q", p, cmd, name)
		return p
	})
}

// needRuntime returns the path of a language's runtime, skipping the
// examples that need it when it is missing (a failure under CI, where
// scripts/deps.sh installs it).
func needRuntime(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; scripts/deps.sh installs it", name)
		}
		t.Skipf("%s is missing; scripts/deps.sh installs it", name)
	}
	return p
}

// TestDocExamples runs every example of README.md and docs/*.md against a
// real `delayq serve` (this test binary run as the delayq command): the curl,
// delayq, printf|nc lines of each sh and console block, and the Python
// and PHP programs, each file's blocks in order on a server of its own,
// the addresses 127.0.0.1:7480 and 11300 swapped for free ports. An
// answer is compared with the output the example's comment shows ("#
// {...}", "# INSERTED 4", a console block's lines; "…" stands for any
// text), and a placeholder such as <reservation> is filled from the
// earlier answers. A block that cannot run here (deploy steps, the test
// and benchmark scripts) is marked `<!-- not-run: reason -->` before its
// fence; an unmarked block with a command the test cannot run fails it,
// so no example is skipped silently and none can drift.
func TestDocExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the delayq command and starts servers")
	}
	// This test binary is the delayq command (TestMain), on PATH as delayq.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, "delayq")); err != nil {
		t.Fatal(err)
	}
	byFile := docExamples(t)
	if len(byFile["README.md"]) < 5 {
		t.Fatalf("found %d examples in README.md, want its quick start's", len(byFile["README.md"]))
	}
	for file, examples := range byFile {
		var run []example
		unrunnable := false
		for _, ex := range examples {
			if ex.notRun != "" {
				continue
			}
			if ex.lang == "sh" || ex.lang == "console" {
				for _, c := range shCommands(ex.text) {
					if w := strings.Fields(c.cmd); len(w) == 0 || !runnable[w[0]] {
						t.Errorf("%s:%d: the test cannot run %q; make it runnable, or mark the block <!-- not-run: reason -->", file, ex.line, c.cmd)
						unrunnable = true
					}
				}
			}
			run = append(run, ex)
		}
		if len(run) == 0 || unrunnable {
			continue
		}
		t.Run(file, func(t *testing.T) { runExamples(t, bin, run) })
	}
}

// runExamples starts a server and runs the examples against it in order.
func runExamples(t *testing.T, bin string, examples []example) {
	dir := t.TempDir()
	// Port 0, and the ports serve logs it bound: a port found free here
	// and bound by serve later may be taken in between.
	serve := exec.Command(filepath.Join(bin, "delayq"), "serve", "--http-addr", "127.0.0.1:0",
		"--beanstalk-addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--log-format", "json")
	logs := &lockedBuffer{}
	serve.Stderr = logs
	serve.Env = append(os.Environ(), asDelayq+"=1")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = serve.Wait() // why it exited is in logs (Main's last line)
		close(exited)
	}()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			t.Errorf("delayq serve still running 30s after SIGTERM")
		}
	})
	at := waitServing(t, logs, exited)
	_, bsPort, err := net.SplitHostPort(at.Beanstalk)
	if err != nil {
		t.Fatalf("serve logged beanstalk %q: %v", at.Beanstalk, err)
	}
	ports := strings.NewReplacer("localhost:7480", at.HTTP, "127.0.0.1:7480", at.HTTP, "11300", bsPort)
	env := append(os.Environ(), asDelayq+"=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DELAYQ_SERVER=http://"+at.HTTP, "SECRET=long-random-string")
	var outputs []string
	exec1 := func(where string, cmd *exec.Cmd) string {
		t.Helper()
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", where, err, out, stderr.String())
		}
		outputs = append(outputs, string(out))
		return string(out)
	}
	for _, ex := range examples {
		where := fmt.Sprintf("%s:%d", ex.file, ex.line)
		switch ex.lang {
		case "sh", "console":
			for _, c := range shCommands(ex.text) {
				line := fill(t, ports.Replace(c.cmd), outputs)
				out := exec1(where+": "+line, exec.Command("bash", "-c", "set -o pipefail; "+line))
				if c.want != "" && !matches(c.want, out) {
					t.Errorf("%s: %s\nanswered:\n%s\nthe example shows:\n%s", where, line, out, c.want)
				}
			}
		case "python":
			exec1(where, exec.Command(needRuntime(t, "python3"), "-c", ports.Replace(ex.text)))
		case "php":
			f := filepath.Join(dir, "example.php")
			if err := os.WriteFile(f, []byte(ports.Replace(ex.text)), 0o600); err != nil {
				t.Fatal(err)
			}
			exec1(where, exec.Command(needRuntime(t, "php"), f))
		}
	}
}

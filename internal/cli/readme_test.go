package cli

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCommandLines parses every delayq command line of the README's
// quick start (the `delayq ...` lines of its shell blocks and the CLI
// paragraph's examples) with the real parser, placeholders such as ID and
// TOPIC filled in, so an example cannot name a flag or a command that
// does not exist. Running them against a server is TestJobLifecycle's and
// its neighbours' work.
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

package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/delayqtest"
)

// TestReplaceRecipe follows docs/sdk.md's "Depending on it today" word
// for word: a new module beside a "clone" of delayq (a symlink to this
// checkout), the go.mod lines copied out of the doc, go mod tidy, and a
// program using the client, run against a real server. Offline
// (GOPROXY=off): the SDK's dependencies come from the module cache this
// checkout's own build filled.
func TestReplaceRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	doc, err := os.ReadFile("../docs/sdk.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\\.mod\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/sdk.md has no ```go.mod block")
	}
	lines := string(m[1])
	if !strings.Contains(lines, "replace github.com/delayq/delayq => ../delayq") {
		t.Fatalf("docs/sdk.md's go.mod lines have no replace to ../delayq:\n%s", lines)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(repo, filepath.Join(dir, "delayq")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "orders")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/orders\n\ngo 1.26\n\n" + lines
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(app, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", gomod)
	write("main.go", `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/delayq/delayq/client"
)

func main() {
	p := client.NewProducer(os.Args[1])
	id, err := p.Delay(context.Background(), "orderclose", []byte("order 42"), 30*time.Minute, client.ID("orderclose-42"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("put", id)
}
`)
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = app
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOSUMDB=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a module with docs/sdk.md's go.mod lines:\n%s\n%v\n%s", strings.Join(args, " "), gomod, err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	srv := delayqtest.NewServer(t)
	out := goCmd("run", ".", srv.URL)
	if out != "put orderclose-42\n" {
		t.Errorf("the program printed %q, want put orderclose-42", out)
	}
	job, err := client.New([]string{srv.URL}).Get(t.Context(), "orderclose-42")
	if err != nil || string(job.Body) != "order 42" {
		t.Errorf("the job the program put: %+v, %v", job, err)
	}
}

package cli

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/delayq/delayq/internal/auth"
)

// tokenCmd is `delayq token`: make tokens and keep the auth file. Plain
// `delayq token NAME` (tokenPrintCmd, the default) only prints; add,
// remove and list edit or read the file in place.
type tokenCmd struct {
	Print  tokenPrintCmd  `cmd:"" default:"withargs" help:"Make a new random token and print its hashed entry, editing nothing (the default: delayq token NAME)."`
	Add    tokenAddCmd    `cmd:"" help:"Make a new token, append its entry to the auth file and print the token once."`
	Remove tokenRemoveCmd `cmd:"" help:"Remove an entry from the auth file."`
	List   tokenListCmd   `cmd:"" help:"List the auth file's entries: names, scopes, topics (never hashes)."`
}

// reloadHint is said wherever the file changes: the server rereads the
// auth file only on SIGHUP (server.reloadOnSIGHUP), not by watching it.
const reloadHint = "The server rereads the file on SIGHUP (kill -HUP <pid>); until then the old tokens stay in force."

// tokenPrintCmd is `delayq token NAME`: a new random token and the
// SHA-256 the auth file keeps. The server never sees the token written
// down, only its hash.
type tokenPrintCmd struct {
	Name   string   `arg:"" help:"Name of the auth entry (shown in logs, keys the rate limit)."`
	Scopes []string `short:"s" default:"produce" enum:"produce,consume,read,admin" help:"Scopes: produce, consume, read, admin."`
	Topics []string `short:"t" default:"*" help:"Topic globs the scopes apply to ('*' any run of bytes)."`
}

// newToken makes a token and its entry.
func newToken(name string, scopes, topics []string) (string, auth.Entry, error) {
	var b [32]byte // 256 bits: a single SHA-256 suffices to keep it at rest
	if _, err := rand.Read(b[:]); err != nil {
		return "", auth.Entry{}, err
	}
	tok := "dq_" + base64.RawURLEncoding.EncodeToString(b[:])
	entry := auth.Entry{Name: name, SHA256: auth.HashToken(tok), Topics: topics}
	for _, s := range scopes {
		entry.Scopes = append(entry.Scopes, auth.Scope(s))
	}
	return tok, entry, nil
}

// Run prints the token (to hand to the client) and the entry to add to
// the auth file.
func (c *tokenPrintCmd) Run(e *env) error {
	tok, entry, err := newToken(c.Name, c.Scopes, c.Topics)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "token (give it to the client; it is not stored anywhere):\n  %s\n\nentry for the auth file's \"tokens\" list:\n", tok)
	return printJSON(e.stdout, entry)
}

// tokenAddCmd is `delayq token add NAME --scopes ... --file PATH`.
type tokenAddCmd struct {
	Name   string   `arg:"" help:"Name of the new entry (shown in logs, keys the rate limit); must not be in the file yet."`
	Scopes []string `short:"s" required:"" enum:"produce,consume,read,admin" help:"Scopes: produce, consume, read, admin (repeat or comma-separate)."`
	Topics []string `short:"t" default:"*" help:"Topic globs the scopes apply to ('*' any run of bytes)."`
	File   string   `short:"f" required:"" env:"DELAYQ_AUTH_FILE" type:"path" help:"The auth file to edit (the server's --auth-file); created 0600 if missing. The server rereads it on SIGHUP (kill -HUP <pid>)."`
}

// Run appends the new entry and prints the token: the only time it is
// ever shown.
func (c *tokenAddCmd) Run(e *env) error {
	tok, entry, err := newToken(c.Name, c.Scopes, c.Topics)
	if err != nil {
		return err
	}
	err = editAuthFile(c.File, func(f *auth.File) error {
		for _, old := range f.Tokens {
			if old.Name == c.Name {
				return fmt.Errorf("%s already has an entry named %q (remove it first, or pick another name)", c.File, c.Name)
			}
		}
		f.Tokens = append(f.Tokens, entry)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "added %q to %s\ntoken (give it to the client; it is shown only now and stored nowhere):\n  %s\n", c.Name, c.File, tok)
	fmt.Fprintln(e.stderr, reloadHint)
	return nil
}

// tokenRemoveCmd is `delayq token remove NAME --file PATH`.
type tokenRemoveCmd struct {
	Name string `arg:"" help:"Name of the entry to remove."`
	File string `short:"f" required:"" env:"DELAYQ_AUTH_FILE" type:"path" help:"The auth file to edit (the server's --auth-file). The server rereads it on SIGHUP (kill -HUP <pid>)."`
}

// Run removes the entry, or fails naming it when the file has none.
func (c *tokenRemoveCmd) Run(e *env) error {
	err := editAuthFile(c.File, func(f *auth.File) error {
		for i, old := range f.Tokens {
			if old.Name == c.Name {
				f.Tokens = append(f.Tokens[:i], f.Tokens[i+1:]...)
				return nil
			}
		}
		return fmt.Errorf("%s has no entry named %q", c.File, c.Name)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "removed %q from %s\n", c.Name, c.File)
	fmt.Fprintln(e.stderr, reloadHint)
	return nil
}

// tokenListCmd is `delayq token list --file PATH`.
type tokenListCmd struct {
	File string `short:"f" required:"" env:"DELAYQ_AUTH_FILE" type:"path" help:"The auth file to read (the server's --auth-file)."`
}

// Run prints one line per entry. Hashes stay out: nobody needs them to
// manage entries, and a listing gets pasted into tickets and chats.
func (c *tokenListCmd) Run(e *env) error {
	f, _, err := readAuthFile(c.File, false)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSCOPES\tTOPICS\tCLIENT NAMES")
	for _, t := range f.Tokens {
		scopes := make([]string, len(t.Scopes))
		for i, s := range t.Scopes {
			scopes[i] = string(s)
		}
		topics := t.Topics
		if len(topics) == 0 {
			topics = []string{"*"}
		}
		cn := strings.Join(t.ClientNames, ",")
		if cn == "" {
			cn = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Name, strings.Join(scopes, ","), strings.Join(topics, ","), cn)
	}
	return w.Flush()
}

// readAuthFile parses the auth file with the server's own parser and
// returns its mode. A missing file is an empty one (mode 0600) when
// create is set, an error otherwise.
func readAuthFile(path string, create bool) (*auth.File, fs.FileMode, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		return &auth.File{}, 0o600, nil
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	f, err := auth.Parse(b)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return f, st.Mode().Perm(), nil
}

// editAuthFile applies edit to the parsed file and replaces the file
// atomically: the new text is checked with auth.Parse, written to a
// temporary file in the same directory with the old mode, synced and
// renamed over the old one. Any failure leaves the file as it was. Two
// editors at once may lose one's change (the last rename wins); the file
// is never half written.
func editAuthFile(path string, edit func(*auth.File) error) error {
	f, mode, err := readAuthFile(path, true)
	if err != nil {
		return err
	}
	if err := edit(f); err != nil {
		return err
	}
	if f.Tokens == nil {
		f.Tokens = []auth.Entry{} // "tokens": [] rather than null
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := auth.Parse(b); err != nil {
		return fmt.Errorf("the edited file would not parse, %s is unchanged: %w", path, err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%s is unchanged: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("%s is unchanged: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("%s is unchanged: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("%s is unchanged: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s is unchanged: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		done = true
		return fmt.Errorf("%s is unchanged: %w", path, err)
	}
	done = true
	// Sync the directory so the rename itself survives a crash.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/delayq/delayq/client"
)

// defaultServer is where the client subcommands look for a server unless
// told otherwise: the default listen address of `delayq serve`.
const defaultServer = "http://127.0.0.1:7480"

// clientFlags are shared by every subcommand that talks to a server.
type clientFlags struct {
	Server []string `env:"DELAYQ_SERVER" default:"${server}" sep:"," help:"Base URLs (or host:port) of delayq servers, comma-separated; the others of a Redis-backed cluster are learnt from /v1/cluster, and calls fail over between them."`
	Token  string   `env:"DELAYQ_TOKEN" help:"Token sent as Authorization: Bearer (servers with --auth-file)."`
	CAFile string   `name:"ca-file" env:"DELAYQ_CA_FILE" type:"path" help:"PEM file of the CA that signed the server's certificate, for https:// servers."`
}

// outputFlags select machine-readable output for commands that print data.
type outputFlags struct {
	JSON bool `help:"Print JSON instead of text."`
}

// client returns a low-level client for --server. It learns the other
// live instances of a cluster from /v1/cluster and fails over to them.
func (f *clientFlags) client() (*client.Client, error) {
	opts := []client.Option{client.RequestTimeout(30 * time.Second)}
	if f.Token != "" {
		opts = append(opts, client.Token(f.Token))
	}
	if f.CAFile != "" {
		opts = append(opts, client.CAFile(f.CAFile))
	}
	return client.NewClient(f.Server, opts...)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ago describes t relative to now for people: "in 29m59s" or "3s ago".
func ago(t, now time.Time) string {
	d := t.Sub(now).Round(time.Millisecond)
	switch {
	case d > 0:
		return "in " + d.String()
	case d < 0:
		return (-d).String() + " ago"
	}
	return "now"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

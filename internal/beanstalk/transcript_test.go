package beanstalk

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Transcripts (testdata/*.txt) are send/expect scripts replayed against
// delayq and, when a beanstalkd binary is at hand, against beanstalkd 1.12,
// so that every reply is proved byte for byte the same. Lines:
//
//	# comment
//	> put 0 0 60 5      send the line and "\r\n" on connection 1
//	2> reserve          the same on connection 2 (connections open on first use)
//	< INSERTED 1        expect the line and "\r\n"; '*' matches any run of
//	                    characters but "\r" and "\n" (ids, pids, uptimes)
//	<< current-jobs: 0  expect the line and "\n" (YAML lines of stats)
//	!raw 1 "use x\r"    send Go-quoted bytes, nothing added
//	!await 2 "stats-job 3" "state: ready"
//	                    send the command on connection 2 until its reply
//	                    (the line, and the YAML after an OK) contains the
//	                    text, polling for up to 5 s: a transcript waits on
//	                    state both servers show, never on the clock
//	!eof 1              expect the server to close connection 1
//	!close 2            close connection 2
//	!shutdown 2         half-close connection 2: shutdown(SHUT_WR), so
//	                    the server reads the end of the stream but can
//	                    still answer
//
// In sent text, {c*N} stands for N copies of the character c.

// beanstalkdPath returns the beanstalkd binary to compare with, or "".
func beanstalkdPath(t *testing.T) string {
	if p := os.Getenv("DELAYQ_TEST_BEANSTALKD"); p != "" {
		return p
	}
	p, err := exec.LookPath("beanstalkd")
	if os.Getenv("CI") == "true" {
		if err != nil {
			t.Fatal("CI=true but beanstalkd is not on PATH: install Debian's beanstalkd (1.12) for the differential tests")
		}
		return p
	}
	return ""
}

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	bin := beanstalkdPath(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("delayq", func(t *testing.T) {
				t.Parallel()
				replay(t, f, startDelayq(t, Limits{}).addr)
			})
			t.Run("beanstalkd", func(t *testing.T) {
				if bin == "" {
					t.Skip("set DELAYQ_TEST_BEANSTALKD=/usr/bin/beanstalkd to compare with beanstalkd 1.12")
				}
				t.Parallel()
				replay(t, f, startBeanstalkd(t, bin))
			})
		})
	}
}

// startBeanstalkd runs a real beanstalkd on a free loopback port.
func startBeanstalkd(t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "-l", "127.0.0.1", "-p", port)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatalf("beanstalkd did not listen on %s", addr)
	return ""
}

var repeatRE = regexp.MustCompile(`\{(.)\*(\d+)\}`)

func expand(s string) string {
	return repeatRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := repeatRE.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[2])
		return strings.Repeat(sub[1], n)
	})
}

// peer is one client connection of a transcript.
type peer struct {
	c net.Conn
	r *bufio.Reader
}

func replay(t *testing.T, file, addr string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	peers := map[int]*peer{}
	get := func(n int) *peer {
		if p := peers[n]; p != nil {
			return p
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		peers[n] = &peer{c: c, r: bufio.NewReader(c)}
		return peers[n]
	}
	for i, line := range strings.Split(string(data), "\n") {
		where := fmt.Sprintf("%s:%d", filepath.Base(file), i+1)
		if err := step(line, get, peers); err != nil {
			t.Fatalf("%s: %s: %v", where, line, err)
		}
	}
	for n, p := range peers {
		p.c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if b, err := p.r.ReadString('\n'); len(b) > 0 || err == nil {
			t.Fatalf("%s: connection %d got unexpected %q at the end", filepath.Base(file), n, b)
		}
	}
}

var lineRE = regexp.MustCompile(`^(\d*)(<<|<|>) ?(.*)$`)

func step(line string, get func(int) *peer, peers map[int]*peer) error {
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	if strings.HasPrefix(line, "!") {
		return directive(strings.Fields(line[1:]), get, peers)
	}
	m := lineRE.FindStringSubmatch(line)
	if m == nil {
		return errors.New("not a transcript line")
	}
	n := 1
	if m[1] != "" {
		n, _ = strconv.Atoi(m[1])
	}
	p := get(n)
	switch m[2] {
	case ">":
		_, err := p.c.Write([]byte(expand(m[3]) + "\r\n"))
		return err
	case "<":
		return expect(p, expand(m[3]), "\r\n")
	default:
		return expect(p, expand(m[3]), "\n")
	}
}

// quoted splits `"a b" "c"` into its Go-quoted strings.
func quoted(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, err
		}
		u, _ := strconv.Unquote(q)
		out = append(out, u)
		s = s[len(q):]
	}
	return out, nil
}

// await sends cmd on p until the whole reply contains want, or fails
// after 5 s with the last reply.
func await(p *peer, cmd, want string) error {
	var reply string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := p.c.Write([]byte(cmd + "\r\n")); err != nil {
			return err
		}
		var err error
		if reply, err = readReply(p); err != nil {
			return err
		}
		if strings.Contains(reply, want) {
			return nil
		}
	}
	return fmt.Errorf("no reply to %q contained %q within 5s; last %q", cmd, want, reply)
}

// readReply reads one reply: its line, and the body an "OK <bytes>" line
// announces.
func readReply(p *peer) (string, error) {
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := p.r.ReadString('\n')
	if err != nil {
		return line, fmt.Errorf("read: %v (got %q)", err, line)
	}
	var n int
	if _, err := fmt.Sscanf(line, "OK %d\r\n", &n); err != nil {
		return line, nil
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(p.r, body); err != nil {
		return line, fmt.Errorf("read body: %v", err)
	}
	return line + string(body), nil
}

func expect(p *peer, want, end string) error {
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := p.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read: %v (got %q)", err, got)
	}
	pat := "^" + strings.ReplaceAll(regexp.QuoteMeta(want), `\*`, `[^\r\n]*`) + regexp.QuoteMeta(end) + "$"
	if !regexp.MustCompile(pat).MatchString(got) {
		return fmt.Errorf("got %q, want %q", got, want+end)
	}
	return nil
}

func directive(f []string, get func(int) *peer, peers map[int]*peer) error {
	if len(f) < 2 {
		return errors.New("directive needs an argument")
	}
	switch f[0] {
	case "await":
		n, _ := strconv.Atoi(f[1])
		args, err := quoted(strings.Join(f[2:], " "))
		if err != nil || len(args) != 2 {
			return fmt.Errorf("await wants a connection and two quoted strings: %v", err)
		}
		return await(get(n), args[0], args[1])
	case "raw":
		n, _ := strconv.Atoi(f[1])
		s, err := strconv.Unquote(strings.Join(f[2:], " "))
		if err != nil {
			return err
		}
		_, err = get(n).c.Write([]byte(expand(s)))
		return err
	case "eof":
		n, _ := strconv.Atoi(f[1])
		p := get(n)
		p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := p.r.ReadByte(); err == nil {
			return fmt.Errorf("got %q, want the connection closed", b)
		}
		return nil
	case "shutdown":
		n, _ := strconv.Atoi(f[1])
		return get(n).c.(*net.TCPConn).CloseWrite()
	case "close":
		n, _ := strconv.Atoi(f[1])
		get(n).c.Close()
		delete(peers, n)
		return nil
	}
	return fmt.Errorf("unknown directive %q", f[0])
}

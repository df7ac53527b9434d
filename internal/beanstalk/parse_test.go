package beanstalk

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
)

func TestParseCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		line string
		want command
		err  error
	}{
		{name: "put", line: "put 1 2 3 4", want: command{op: opPut, pri: 1, delay: 2, ttr: 3, size: 4}},
		{name: "put extra spaces", line: "put  1  2 3 4", want: command{op: opPut, pri: 1, delay: 2, ttr: 3, size: 4}},
		{name: "put trailing", line: "put 1 2 3 4 x", want: command{op: opPut, pri: 1, delay: 2, ttr: 3, size: 4, trailing: true}},
		{name: "put pri too big", line: "put 4294967296 0 1 1", err: errBadFormat},
		{name: "reserve-with-timeout negative", line: "reserve-with-timeout -1", want: command{op: opReserveWithTimeout, timeout: -1}},
		{name: "reserve-with-timeout cut to int", line: "reserve-with-timeout 4294967296", want: command{op: opReserveWithTimeout}},
		{name: "kick negative wraps", line: "kick -1", want: command{op: opKick, bound: 1<<32 - 1}},
		{name: "pause-tube glued", line: "pause-tubefoo 5", want: command{op: opPauseTube, tube: "foo", delay: 5}},
		{name: "quit with garbage", line: "quitnow", want: command{op: opQuit}},
		{name: "nul", line: "stats\x00", err: errBadFormat},
		{name: "unknown", line: "frobnicate", err: errUnknownCommand},
		{name: "use too long", line: "use " + string(make([]byte, 201)), err: errBadFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseCommand([]byte(tt.line))
			if err != tt.err {
				t.Fatalf("parseCommand(%q) error = %v, want %v", tt.line, err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(command{})); err == nil && diff != "" {
				t.Errorf("parseCommand(%q) mismatch (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

// FuzzParseCommand checks that no line makes the parser panic, and that
// what it accepts is something the handlers can run safely.
func FuzzParseCommand(f *testing.F) {
	for _, p := range prefixes {
		f.Add([]byte(p.text))
		f.Add([]byte(p.text + "1 2 3 4"))
	}
	f.Add([]byte("pause-tube default 10"))
	f.Add([]byte("reserve-with-timeout -99999999999999999999"))
	f.Fuzz(func(t *testing.T, line []byte) {
		cmd, err := parseCommand(line)
		if err != nil {
			if err != errBadFormat && err != errUnknownCommand {
				t.Fatalf("parseCommand(%q) error = %v", line, err)
			}
			return
		}
		if cmd.op <= opUnknown || cmd.op >= numOps || handlers[cmd.op] == nil {
			t.Fatalf("parseCommand(%q) = op %d with no handler", line, cmd.op)
		}
		switch cmd.op {
		case opUse, opWatch, opIgnore, opStatsTube:
			if !delayq.ValidTopic(cmd.tube) {
				t.Fatalf("parseCommand(%q) accepted tube %q", line, cmd.tube)
			}
		case opPauseTube:
			if !cmd.badName && !delayq.ValidTopic(cmd.tube) {
				t.Fatalf("parseCommand(%q) accepted tube %q", line, cmd.tube)
			}
		}
	})
}

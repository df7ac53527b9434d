package beanstalk

import (
	"bytes"
	"math"
	"strings"

	"github.com/delayq/delayq"
)

// op names a wire command. The zero op is an unknown command.
type op int

// The commands of beanstalkd 1.12, in the order its stats report them.
const (
	opUnknown op = iota
	opPut
	opPeek
	opPeekReady
	opPeekDelayed
	opPeekBuried
	opReserve
	opReserveWithTimeout
	opReserveJob
	opDelete
	opRelease
	opUse
	opWatch
	opIgnore
	opBury
	opKick
	opKickJob
	opTouch
	opStats
	opStatsJob
	opStatsTube
	opListTubes
	opListTubeUsed
	opListTubesWatched
	opPauseTube
	opQuit
	numOps
)

// prefixes is beanstalkd's which_cmd: the first entry whose text starts the
// line names the command, so the order matters ("reserve-job " before
// "reserve", "stats-job " before "stats") and so do the trailing spaces.
// Trailing garbage is then refused (or not) by each command's own parser,
// exactly as beanstalkd does.
var prefixes = []struct {
	text string
	op   op
}{
	{"put ", opPut},
	{"peek ", opPeek},
	{"peek-ready", opPeekReady},
	{"peek-delayed", opPeekDelayed},
	{"peek-buried", opPeekBuried},
	{"reserve-with-timeout ", opReserveWithTimeout},
	{"reserve-job ", opReserveJob},
	{"reserve", opReserve},
	{"delete ", opDelete},
	{"release ", opRelease},
	{"bury ", opBury},
	{"kick ", opKick},
	{"kick-job ", opKickJob},
	{"touch ", opTouch},
	{"stats-job ", opStatsJob},
	{"stats-tube ", opStatsTube},
	{"stats", opStats},
	{"use ", opUse},
	{"watch ", opWatch},
	{"ignore ", opIgnore},
	{"list-tubes-watched", opListTubesWatched},
	{"list-tube-used", opListTubeUsed},
	{"list-tubes", opListTubes},
	{"quit", opQuit},
	{"pause-tube", opPauseTube},
}

// command is a parsed command line. Only the fields of its op are set.
type command struct {
	op      op
	id      uint64
	pri     uint32
	delay   uint32 // seconds
	ttr     uint32 // seconds
	size    uint32 // body bytes, put only
	tube    string
	timeout int64  // reserve-with-timeout seconds; negative waits forever
	bound   uint32 // kick
	// trailing marks a put line with garbage after its size: beanstalkd
	// refuses it with BAD_FORMAT, but only after the JOB_TOO_BIG check.
	trailing bool
	// badName marks a pause-tube whose name is refused after the command
	// was counted, as beanstalkd does.
	badName bool
}

// parseCommand parses one command line without its "\r\n". It returns
// errBadFormat or errUnknownCommand for lines beanstalkd refuses, and
// follows beanstalkd's parser quirk for quirk, so that the same line gets
// the same reply from both servers.
func parseCommand(line []byte) (command, error) {
	if bytes.IndexByte(line, 0) >= 0 { // beanstalkd's "possible maliciousness" check
		return command{}, errBadFormat
	}
	s := string(line)
	for _, p := range prefixes {
		if strings.HasPrefix(s, p.text) {
			parse := parsers[p.op]
			if parse == nil {
				return command{op: p.op}, nil
			}
			c, ok := parse(s, s[len(p.text):])
			if !ok {
				return command{}, errBadFormat
			}
			c.op = p.op
			return c, nil
		}
	}
	return command{}, errUnknownCommand
}

// parsers holds each command's argument parser; it gets the whole line and
// the rest after the command's prefix. A missing entry takes anything.
var parsers = map[op]func(line, rest string) (command, bool){
	opPut:                parsePut,
	opPeek:               parseID,
	opReserveJob:         parseID,
	opDelete:             parseID,
	opKickJob:            parseID,
	opTouch:              parseID,
	opStatsJob:           parseID,
	opPeekReady:          exact("peek-ready"),
	opPeekDelayed:        exact("peek-delayed"),
	opPeekBuried:         exact("peek-buried"),
	opReserve:            exact("reserve"),
	opStats:              exact("stats"),
	opListTubes:          exact("list-tubes"),
	opListTubeUsed:       exact("list-tube-used"),
	opListTubesWatched:   exact("list-tubes-watched"),
	opReserveWithTimeout: parseReserveTimeout,
	opRelease:            parseRelease,
	opBury:               parseBury,
	opKick:               parseKick,
	opUse:                parseName,
	opWatch:              parseName,
	opIgnore:             parseName,
	opStatsTube:          parseName,
	opPauseTube:          parsePauseTube,
}

// exact refuses trailing garbage after commands without arguments.
func exact(name string) func(line, rest string) (command, bool) {
	return func(line, _ string) (command, bool) { return command{}, line == name }
}

func parsePut(_, rest string) (command, bool) {
	var c command
	var ok bool
	if c.pri, rest, ok = readUint32(rest); !ok {
		return c, false
	}
	if c.delay, rest, ok = readUint32(rest); !ok {
		return c, false
	}
	if c.ttr, rest, ok = readUint32(rest); !ok {
		return c, false
	}
	if c.size, rest, ok = readUint32(rest); !ok {
		return c, false
	}
	c.trailing = rest != ""
	return c, true
}

func parseID(_, rest string) (command, bool) {
	id, rest, ok := readUint64(rest)
	return command{id: id}, ok && rest == ""
}

func parseRelease(_, rest string) (command, bool) {
	var c command
	var ok bool
	if c.id, rest, ok = readUint64(rest); !ok {
		return c, false
	}
	if c.pri, rest, ok = readUint32(rest); !ok {
		return c, false
	}
	c.delay, rest, ok = readUint32(rest)
	return c, ok && rest == ""
}

func parseBury(_, rest string) (command, bool) {
	var c command
	var ok bool
	if c.id, rest, ok = readUint64(rest); !ok {
		return c, false
	}
	c.pri, rest, ok = readUint32(rest)
	return c, ok && rest == ""
}

// parseReserveTimeout follows beanstalkd's strtol: leading white space, a
// sign, digits, anything after them ignored, no digits at all meaning 0;
// only an overflow is refused. The value is then cut to a C int.
func parseReserveTimeout(_, rest string) (command, bool) {
	v, _, ok := strtoNum(rest, true)
	if !ok {
		return command{}, false
	}
	return command{timeout: int64(int32(v))}, true
}

// parseKick follows beanstalkd's strtoul: as strtol, but no digits is
// refused, a minus sign negates modulo 2^64, and the value is cut to a C
// unsigned int.
func parseKick(_, rest string) (command, bool) {
	v, n, ok := strtoNum(rest, false)
	if !ok || n == 0 {
		return command{}, false
	}
	return command{bound: uint32(v)}, true
}

func parseName(_, rest string) (command, bool) {
	return command{tube: rest}, delayq.ValidTopic(rest)
}

// parsePauseTube reads a name (spaces skipped, then name characters) and
// a delay that must end the line. A name starting with '-' is refused
// after the command is counted (badName), as beanstalkd does.
func parsePauseTube(_, rest string) (command, bool) {
	rest = strings.TrimLeft(rest, " ")
	n := 0
	for n < len(rest) && isNameChar(rest[n]) {
		n++
	}
	if n == 0 {
		return command{}, false
	}
	c := command{tube: rest[:n]}
	delay, after, ok := readUint32(rest[n:])
	if !ok || after != "" {
		return command{}, false
	}
	c.delay = delay
	c.badName = !delayq.ValidTopic(c.tube)
	return c, true
}

func isNameChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-+/;.$_()", b) >= 0
}

// readUint64 is beanstalkd's read_u64: spaces skipped, then at least one
// digit, no overflow; it returns the rest of s.
func readUint64(s string) (uint64, string, bool) {
	s = strings.TrimLeft(s, " ")
	n := 0
	var v uint64
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		d := uint64(s[n] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, "", false
		}
		v = v*10 + d
		n++
	}
	if n == 0 {
		return 0, "", false
	}
	return v, s[n:], true
}

// readUint32 is beanstalkd's read_u32.
func readUint32(s string) (uint32, string, bool) {
	v, rest, ok := readUint64(s)
	if !ok || v > math.MaxUint32 {
		return 0, "", false
	}
	return uint32(v), rest, true
}

// strtoNum imitates C's strtol (signed) or strtoul (unsigned) on a 64-bit
// platform: it returns the value as 64 bits, how many digits it read, and
// false on overflow (errno ERANGE).
func strtoNum(s string, signed bool) (uint64, int, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\v\f\r", s[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var v uint64
	n := 0
	overflow := false
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			overflow = true
		}
		v = v*10 + d
		n++
	}
	if n == 0 {
		return 0, 0, true
	}
	if overflow {
		return 0, n, false
	}
	if signed {
		limit := uint64(math.MaxInt64)
		if neg {
			limit++
		}
		if v > limit {
			return 0, n, false
		}
	}
	if neg {
		v = -v
	}
	return v, n, true
}

package delayq

import (
	"strconv"
	"strings"
	"time"
)

// ParseDuration is time.ParseDuration plus a day unit, "d" (24 hours),
// since delays of days are common in a delay queue ("7d", "1d12h",
// "1.5d"). Every place that reads a duration from people or from JSON
// uses it, so the units are the same everywhere.
func ParseDuration(s string) (time.Duration, error) {
	if !strings.Contains(s, "d") {
		return time.ParseDuration(s)
	}
	var b strings.Builder
	rest := s
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		b.WriteByte(rest[0])
		rest = rest[1:]
	}
	for rest != "" {
		n := 0
		for n < len(rest) && (rest[n] >= '0' && rest[n] <= '9' || rest[n] == '.') {
			n++
		}
		num := rest[:n]
		u := n
		for u < len(rest) && !(rest[u] >= '0' && rest[u] <= '9' || rest[u] == '.') {
			u++
		}
		unit := rest[n:u]
		rest = rest[u:]
		if unit != "d" {
			b.WriteString(num + unit)
			continue
		}
		days, err := strconv.ParseFloat(num, 64)
		if err != nil || num == "" {
			return 0, &time.ParseError{Layout: "duration", Value: s, Message: ": invalid duration " + strconv.Quote(s)}
		}
		b.WriteString(strconv.FormatFloat(days*24, 'f', -1, 64) + "h")
	}
	d, err := time.ParseDuration(b.String())
	if err != nil {
		return 0, &time.ParseError{Layout: "duration", Value: s, Message: ": invalid duration " + strconv.Quote(s)}
	}
	return d, nil
}

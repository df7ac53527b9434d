package schedule

import (
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"

	"github.com/delayq/delayq"
)

// MinEvery is the shortest "@every" interval. Tick ids have millisecond
// precision, so shorter would work, but a schedule firing faster than this
// is a loop, not a schedule, and costs three durable writes per tick.
const MinEvery = 100 * time.Millisecond

// parser reads cron specs with an optional seconds field (so "*/5 * * * *"
// works as it does in crontab, and "*/10 * * * * *" fires every 10
// seconds) and descriptors. DowOrDom gives the day fields crontab's "or"
// meaning: "0 0 0 1 * MON" is every 1st and every Monday.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month |
	cron.Dow | cron.Descriptor | cron.DowOrDom).WithMinEveryInterval(MinEvery)

// timing is a parsed spec: the ticks of one schedule. Every tick is a
// whole millisecond in UTC.
type timing struct {
	spec  *cron.SpecSchedule // nil for "@every"
	every time.Duration      // > 0 for "@every"
}

// parseTiming parses spec in the IANA zone tz ("" is UTC). Its errors are
// *delayq.ValidationError with the codes the API documents.
func parseTiming(spec, tz string, now time.Time) (*timing, error) {
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, delayq.Invalid(delayq.CodeBadCron, "cron", "give the time zone in the timezone field, not in the spec")
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, delayq.Invalid(delayq.CodeBadCron, "cron", "%q: %v", clip(spec), err)
	}
	switch s := s.(type) {
	case cron.ConstantDelaySchedule:
		d := s.Delay.Truncate(time.Millisecond)
		if d < MinEvery {
			return nil, delayq.Invalid(delayq.CodeBadEvery, "every", "%s is under the minimum of %s", s.Delay, MinEvery)
		}
		return &timing{every: d}, nil
	case *cron.SpecSchedule:
		c := *s
		c.Location = loc
		t := &timing{spec: &c}
		// A spec such as Feb 31 parses but never fires: the parser's next
		// is then the zero time. Refuse it rather than keep a dead schedule.
		if t.next(now, time.Time{}).IsZero() {
			return nil, delayq.Invalid(delayq.CodeCronNeverFires, "cron", "%q never fires", clip(spec))
		}
		return t, nil
	}
	return nil, delayq.Invalid(delayq.CodeBadCron, "cron", "%q is not a supported spec", clip(spec))
}

// loadZone resolves an IANA zone name; "" is UTC. "Local" is refused: it
// would make instances on different hosts disagree on the ticks.
func loadZone(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, delayq.Invalid(delayq.CodeBadTimezone, "timezone", "\"Local\" depends on the host; name an IANA zone such as Europe/Berlin")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, delayq.Invalid(delayq.CodeBadTimezone, "timezone", "%q is not a known IANA time zone", clip(tz))
	}
	return loc, nil
}

// next is the first tick after t. anchor is where "@every" ticks are
// counted from (anchor + k·every, k >= 1). Zero: no tick (a cron spec
// with no date in the parser's search window).
func (tm *timing) next(t, anchor time.Time) time.Time {
	if tm.every > 0 {
		if t.Before(anchor) {
			return anchor.Add(tm.every)
		}
		k := t.Sub(anchor)/tm.every + 1
		return anchor.Add(k * tm.every)
	}
	n := tm.spec.Next(t)
	if !n.IsZero() && tm.repeatsWallClock(n) {
		n = tm.spec.Next(n)
	}
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// allHours are the Hour bits of a spec that fires in every hour.
const allHours = 1<<24 - 1

// repeatsWallClock reports whether n is the second occurrence of its wall
// clock time (the hour repeated when the clocks go back) for a spec at
// fixed hours. Such a spec means "at 02:30 local time", once a day, as
// crontab runs it; the parser alone would fire it in both 02:30s. A spec
// for every hour keeps both: those are two real hours.
func (tm *timing) repeatsWallClock(n time.Time) bool {
	if tm.spec.Hour&allHours == allHours {
		return false
	}
	loc := tm.spec.Location
	_, after := n.In(loc).Zone()
	_, before := n.Add(-3 * time.Hour).In(loc).Zone()
	if before <= after {
		return false
	}
	first := n.Add(-time.Duration(before-after) * time.Second)
	const wall = "2006-01-02 15:04:05.000"
	return first.In(loc).Format(wall) == n.In(loc).Format(wall)
}

// prev is the last tick before t (zero if none). For "@every" ticks before
// anchor+every do not exist.
func (tm *timing) prev(t, anchor time.Time) time.Time {
	if tm.every > 0 {
		if !t.After(anchor.Add(tm.every)) {
			return time.Time{}
		}
		k := (t.Sub(anchor) - 1) / tm.every
		return anchor.Add(k * tm.every)
	}
	p := tm.spec.Prev(t)
	if p.IsZero() {
		return p
	}
	return p.UTC()
}

// newest is the latest tick after base and at or before limit (zero if
// none), as next counts ticks. prev only jumps near limit: around a DST
// gap the cron library's prev and next disagree on the moved tick, so the
// last steps walk forward with next.
func (tm *timing) newest(base, limit, anchor time.Time) time.Time {
	var newest time.Time
	start := base
	if p := tm.prev(limit, anchor); !p.IsZero() {
		if q := tm.prev(p, anchor); q.After(base) {
			start, newest = q, q
		}
	}
	for t := tm.next(start, anchor); !t.IsZero() && !t.After(limit); t = tm.next(t, anchor) {
		newest = t
	}
	return newest
}

// clip keeps error messages short.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

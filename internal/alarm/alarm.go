// Package alarm watches topics and tells a URL when something is wrong:
// too many buried jobs, a ready job waiting too long, fires running late,
// consumers failing. An alarm names a webhook URL, topic globs and
// conditions; every evaluation interval the Service checks each condition
// for each matching topic and POSTs an api.AlarmEvent when one starts to
// hold ("firing"), again every Repeat while it holds, and once when it
// stops ("resolved").
//
// Alarms and their firing state are documents of a store.DocStore, so
// they survive restarts, and instances sharing a store (Redis) agree on
// them: a state change is written by compare-and-set on the document's
// revision before its event is sent, and only the instance whose write
// won sends it. Each event is thus sent by exactly one instance (at most
// once: an instance that dies between its write and its POST loses that
// event, and the next repeat or the resolution still comes).
package alarm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/url"
	"path"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Limits of an alarm definition.
const (
	MaxNameLen = 128
	MaxTopics  = 100
	MaxURLLen  = 2048
	// MinRepeat is the shortest repeat: an event a second is a flood
	// already, and evaluations are seconds apart anyway.
	MinRepeat = time.Second
)

// Conditions, as they are named in events and on the wire.
const (
	CondBuried      = "buried_over"
	CondOldestReady = "oldest_ready_over"
	CondLatenessP99 = "lateness_p99_over"
	CondFailures    = "failures_per_min_over"
)

// Alarm is a stored alarm definition.
type Alarm struct {
	Name string `json:"-"`
	Rev  uint64 `json:"-"`

	URL    string   `json:"url"`
	Topics []string `json:"topics,omitempty"` // globs (path.Match); none: every topic

	BuriedOver         *int           `json:"buried_over,omitempty"`
	OldestReadyOver    *time.Duration `json:"oldest_ready_over,omitempty"`
	LatenessP99Over    *time.Duration `json:"lateness_p99_over,omitempty"`
	FailuresPerMinOver *float64       `json:"failures_per_min_over,omitempty"`

	Repeat time.Duration `json:"repeat,omitempty"` // 0: no repeat

	// Secret signs the events (webhook.go). It is stored as given, since
	// signing needs it, and never sent back: Request shows api.SecretMask.
	Secret  string            `json:"secret,omitempty"`
	Headers map[string]string `json:"headers,omitempty"` // sent with every event
	Format  string            `json:"format,omitempty"`  // "" is api.AlarmFormatDelayq

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Matches reports whether the alarm watches topic.
func (a *Alarm) Matches(topic string) bool {
	if len(a.Topics) == 0 {
		return true
	}
	for _, g := range a.Topics {
		if ok, _ := path.Match(g, topic); ok {
			return true
		}
	}
	return false
}

// thresholds lists the alarm's conditions with their thresholds, in a
// fixed order (counts, seconds or failures per minute).
func (a *Alarm) thresholds() []threshold {
	var out []threshold
	if a.BuriedOver != nil {
		out = append(out, threshold{CondBuried, float64(*a.BuriedOver)})
	}
	if a.OldestReadyOver != nil {
		out = append(out, threshold{CondOldestReady, a.OldestReadyOver.Seconds()})
	}
	if a.LatenessP99Over != nil {
		out = append(out, threshold{CondLatenessP99, a.LatenessP99Over.Seconds()})
	}
	if a.FailuresPerMinOver != nil {
		out = append(out, threshold{CondFailures, *a.FailuresPerMinOver})
	}
	return out
}

type threshold struct {
	cond  string
	value float64
}

// ValidName reports whether name can name an alarm: 1 to MaxNameLen
// bytes of [A-Za-z0-9_.-] (safe in a URL path and a CLI argument).
func ValidName(name string) bool {
	return delayq.ValidObjectName(name, MaxNameLen)
}

// CheckName refuses an invalid alarm name with a named error.
func CheckName(name string) error {
	if !ValidName(name) {
		return delayq.Invalid(delayq.CodeBadAlarmName, "name", "%q is not a valid alarm name (1-%d bytes of [A-Za-z0-9_.-])", clip(name), MaxNameLen)
	}
	return nil
}

// FromRequest validates a wire definition and returns the alarm it
// defines (without Rev and times), or a *delayq.ValidationError naming
// the first problem.
func FromRequest(name string, r *api.AlarmRequest) (*Alarm, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := checkURL(r.URL); err != nil {
		return nil, err
	}
	a := &Alarm{Name: name, URL: r.URL}
	if len(r.Topics) > MaxTopics {
		return nil, delayq.Invalid(delayq.CodeBadTopics, "topics", "%d globs, at most %d", len(r.Topics), MaxTopics)
	}
	for _, g := range r.Topics {
		if g == "" || len(g) > delayq.MaxNameLen {
			return nil, delayq.Invalid(delayq.CodeBadTopics, "topics", "%q is not a topic glob (1-%d bytes)", clip(g), delayq.MaxNameLen)
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, delayq.Invalid(delayq.CodeBadTopics, "topics", "%q is not a valid glob (use *, ? and [a-z])", clip(g))
		}
		a.Topics = append(a.Topics, g)
	}
	w := r.When
	if w.BuriedOver == nil && w.OldestReadyOver == nil && w.LatenessP99Over == nil && w.FailuresPerMinOver == nil {
		return nil, delayq.Invalid(delayq.CodeNoCondition, "when", "give at least one of buried_over, oldest_ready_over, lateness_p99_over, failures_per_min_over")
	}
	if w.BuriedOver != nil {
		if *w.BuriedOver < 0 {
			return nil, delayq.Invalid(delayq.CodeBadCondition, "when.buried_over", "%d is negative", *w.BuriedOver)
		}
		a.BuriedOver = ptr(*w.BuriedOver)
	}
	dur := func(field string, d *api.Duration) (*time.Duration, error) {
		if d == nil {
			return nil, nil
		}
		if *d < 0 {
			return nil, delayq.Invalid(delayq.CodeBadCondition, field, "%s is negative", time.Duration(*d))
		}
		return ptr(time.Duration(*d)), nil
	}
	var err error
	if a.OldestReadyOver, err = dur("when.oldest_ready_over", w.OldestReadyOver); err != nil {
		return nil, err
	}
	if a.LatenessP99Over, err = dur("when.lateness_p99_over", w.LatenessP99Over); err != nil {
		return nil, err
	}
	if f := w.FailuresPerMinOver; f != nil {
		if *f < 0 || math.IsNaN(*f) || math.IsInf(*f, 0) {
			return nil, delayq.Invalid(delayq.CodeBadCondition, "when.failures_per_min_over", "%v is not a count of zero or more", *f)
		}
		a.FailuresPerMinOver = ptr(*f)
	}
	if r.Repeat != nil {
		d := time.Duration(*r.Repeat)
		if d < 0 {
			return nil, delayq.Invalid(delayq.CodeBadRepeat, "repeat", "%s is negative", d)
		}
		if d > 0 && d < MinRepeat {
			return nil, delayq.Invalid(delayq.CodeBadRepeat, "repeat", "%s is under the minimum of %s (0 or absent: no repeat)", d, MinRepeat)
		}
		a.Repeat = d
	}
	if err := checkWebhook(a, r); err != nil {
		return nil, err
	}
	return a, nil
}

func checkURL(s string) error {
	if s == "" {
		return delayq.Invalid(delayq.CodeBadURL, "url", "give the URL events are POSTed to")
	}
	if len(s) > MaxURLLen {
		return delayq.Invalid(delayq.CodeBadURL, "url", "%d bytes, at most %d", len(s), MaxURLLen)
	}
	u, err := url.Parse(s)
	if err != nil {
		return delayq.Invalid(delayq.CodeBadURL, "url", "%q is not a URL", clip(s))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return delayq.Invalid(delayq.CodeBadURL, "url", "%q: the scheme must be http or https", clip(s))
	}
	if u.Host == "" {
		return delayq.Invalid(delayq.CodeBadURL, "url", "%q names no host", clip(s))
	}
	return nil
}

// Parse reads a PUT /v1/alarms/{name} body strictly (one JSON object, no
// unknown fields) and validates it (FromRequest). The HTTP API decodes
// with its own reader; Parse is the same rules in one call, for the CLI's
// files and the fuzz target.
func Parse(name string, body []byte) (*Alarm, error) {
	var r api.AlarmRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, delayq.Invalid(delayq.CodeBadJSON, "", "%s", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, delayq.Invalid(delayq.CodeBadJSON, "", "the body holds more than one JSON value")
	}
	return FromRequest(name, &r)
}

// Request is the wire definition of a, the inverse of FromRequest.
func (a *Alarm) Request() api.AlarmRequest {
	r := api.AlarmRequest{URL: a.URL, Topics: append([]string(nil), a.Topics...)}
	if a.BuriedOver != nil {
		r.When.BuriedOver = ptr(*a.BuriedOver)
	}
	if a.OldestReadyOver != nil {
		r.When.OldestReadyOver = ptr(api.Duration(*a.OldestReadyOver))
	}
	if a.LatenessP99Over != nil {
		r.When.LatenessP99Over = ptr(api.Duration(*a.LatenessP99Over))
	}
	if a.FailuresPerMinOver != nil {
		r.When.FailuresPerMinOver = ptr(*a.FailuresPerMinOver)
	}
	if a.Repeat > 0 {
		r.Repeat = ptr(api.Duration(a.Repeat))
	}
	if a.Secret != "" {
		r.Secret = api.SecretMask
	}
	if len(a.Headers) > 0 {
		r.Headers = make(map[string]string, len(a.Headers))
		for k, v := range a.Headers {
			r.Headers[k] = v
		}
	}
	r.Format = a.format()
	return r
}

func ptr[T any](v T) *T { return &v }

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

package api

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/delayq/delayq"
)

// EncodeBody writes a body for the wire: a string when it is valid UTF-8,
// base64 otherwise, so any bytes survive JSON. Exactly one result is set.
func EncodeBody(b []byte) (body, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// DecodeBody reads a body given as a string or as base64: nil when
// neither is given, so an update can tell "keep the body" from "clear it"
// (a given empty body is a non-nil empty slice).
func DecodeBody(body, b64 *string) ([]byte, error) {
	switch {
	case body != nil && b64 != nil:
		return nil, delayq.Invalid(delayq.CodeBadBody, "body", "give body or body_base64, not both")
	case body != nil:
		return []byte(*body), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, delayq.Invalid(delayq.CodeBadBody, "body_base64", "not standard base64: %v", err)
		}
		return b, nil
	}
	return nil, nil
}

// FromJob is j on the wire: the body as a string when it is valid UTF-8,
// as base64 otherwise; reservation and deadline only while it is reserved
// (a job read back by an operator carries no stale token).
func FromJob(j *delayq.Job) Job {
	w := Job{
		ID: j.ID, Seq: j.Seq, Topic: j.Topic, State: string(j.State),
		Priority: j.Priority, TTR: j.TTR.Seconds(), MaxAttempts: j.MaxAttempts,
		Attempts: j.Attempts, Due: Time{Time: j.Due}, Created: Time{Time: j.Created},
		Timeouts: j.Timeouts, Releases: j.Releases, Buries: j.Buries, Kicks: j.Kicks,
		LastReason: j.LastReason,
	}
	if !j.LastFailed.IsZero() {
		w.LastFailed = &Time{Time: j.LastFailed}
	}
	w.Body, w.BodyBase64 = EncodeBody(j.Body)
	if j.State == delayq.StateReserved {
		w.Reservation = j.Reservation
		w.Deadline = &Time{Time: j.Deadline}
	}
	if !j.Ended.IsZero() {
		w.EndedAt = &Time{Time: j.Ended}
	}
	if len(j.History) > 0 {
		w.History = make([]Attempt, len(j.History))
		for i, a := range j.History {
			w.History[i] = Attempt{Attempt: a.N, ReservedAt: Time{Time: a.Reserved}, By: a.By, Outcome: string(a.Outcome), Reason: a.Reason}
			if !a.Ended.IsZero() {
				w.History[i].EndedAt = &Time{Time: a.Ended}
			}
		}
	}
	return w
}

// FromJobs converts jobs; never nil, so it encodes as [].
func FromJobs(jobs []*delayq.Job) []Job {
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, FromJob(j))
	}
	return out
}

// ToJob converts a job on the wire back into a delayq.Job. A job with
// neither body field has an empty body.
func (w *Job) ToJob() (*delayq.Job, error) {
	j := &delayq.Job{
		ID: w.ID, Seq: w.Seq, Topic: w.Topic, State: delayq.State(w.State),
		Priority: w.Priority, TTR: time.Duration(w.TTR * float64(time.Second)),
		MaxAttempts: w.MaxAttempts, Attempts: w.Attempts,
		Due: w.Due.Time, Created: w.Created.Time, Reservation: w.Reservation,
		Timeouts: w.Timeouts, Releases: w.Releases, Buries: w.Buries, Kicks: w.Kicks,
		LastReason: w.LastReason,
	}
	if w.Deadline != nil {
		j.Deadline = w.Deadline.Time
	}
	if w.LastFailed != nil {
		j.LastFailed = w.LastFailed.Time
	}
	if w.EndedAt != nil {
		j.Ended = w.EndedAt.Time
	}
	for _, a := range w.History {
		h := delayq.Attempt{N: a.Attempt, Reserved: a.ReservedAt.Time, By: a.By, Outcome: delayq.Outcome(a.Outcome), Reason: a.Reason}
		if a.EndedAt != nil {
			h.Ended = a.EndedAt.Time
		}
		j.History = append(j.History, h)
	}
	b, err := DecodeBody(w.Body, w.BodyBase64)
	if err != nil {
		return nil, delayq.Invalid(delayq.CodeBadBody, "body", "job %q: %s", w.ID, delayq.Message(err))
	}
	if b == nil {
		b = []byte{}
	}
	j.Body = b
	return j, nil
}

// ToJobs converts a list of wire jobs.
func ToJobs(ws []Job) ([]*delayq.Job, error) {
	out := make([]*delayq.Job, 0, len(ws))
	for i := range ws {
		j, err := ws[i].ToJob()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// CheckUTF8 refuses JSON text that is not valid UTF-8 or that escapes a
// lone UTF-16 surrogate ("\ud800"): encoding/json would quietly store
// U+FFFD in its place, and the job's body would not be the one sent.
// Bytes that are not text belong in body_base64.
func CheckUTF8(raw []byte) error {
	if !utf8.Valid(raw) {
		return delayq.Invalid(delayq.CodeBadUTF8, "", "the request is not valid UTF-8; send bytes that are not text as body_base64")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] == 'u' {
			r, ok := hex4(raw, i+2)
			switch {
			case !ok:
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := hex4(raw, i+8)
				if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
					return errSurrogate(raw[i : i+6])
				}
				i += 6
			case r >= 0xDC00 && r <= 0xDFFF:
				return errSurrogate(raw[i : i+6])
			}
		}
		i++ // skip the escaped character
	}
	return nil
}

func errSurrogate(esc []byte) error {
	return delayq.Invalid(delayq.CodeBadUTF8, "", "%s is half of a UTF-16 surrogate pair, not a character; send bytes that are not text as body_base64", esc)
}

// hex4 reads the four hex digits at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// FromInstance is a live instance on the wire.
func FromInstance(in delayq.Instance) Instance {
	w := Instance{URL: in.URL, Protocols: in.Protocols, Buckets: in.Buckets}
	if !in.Since.IsZero() {
		w.Since = &Time{Time: in.Since}
	}
	return w
}

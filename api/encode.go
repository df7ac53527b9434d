package api

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/delayq/delayq"
)

// AppendJSON appends r as encoding/json would marshal it, byte for byte,
// without reflection. A reserve answer is the hottest thing the HTTP API
// writes: encoding/json's reflection, its MarshalJSON calls for every time
// and their re-validation were 8% of the server's CPU while a burst of
// 100,000 jobs drained through reserves of 100. FuzzJobsResponseJSON
// holds it to encoding/json's output.
func (r *JobsResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"jobs":`...)
	if r.Jobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			b = r.Jobs[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	if r.Next != "" {
		b = append(b, `,"next":`...)
		b = appendString(b, r.Next)
	}
	return append(b, '}')
}

// AppendJSON appends j as encoding/json would marshal it (see
// JobsResponse.AppendJSON).
func (j *Job) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, j.Seq, 10)
	b = append(b, `,"topic":`...)
	b = appendString(b, j.Topic)
	b = append(b, `,"state":`...)
	b = appendString(b, j.State)
	if j.Body != nil {
		b = append(b, `,"body":`...)
		b = appendString(b, *j.Body)
	}
	if j.BodyBase64 != nil {
		b = append(b, `,"body_base64":`...)
		b = appendString(b, *j.BodyBase64)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendUint(b, uint64(j.Priority), 10)
	b = append(b, `,"ttr":`...)
	b = appendFloat(b, j.TTR)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(j.Attempts), 10)
	b = append(b, `,"due":`...)
	b = j.Due.appendJSON(b)
	b = append(b, `,"created":`...)
	b = j.Created.appendJSON(b)
	if j.Reservation != "" {
		b = append(b, `,"reservation":`...)
		b = appendString(b, j.Reservation)
	}
	if j.Deadline != nil {
		b = append(b, `,"deadline":`...)
		b = j.Deadline.appendJSON(b)
	}
	b = append(b, `,"timeouts":`...)
	b = strconv.AppendInt(b, int64(j.Timeouts), 10)
	b = append(b, `,"releases":`...)
	b = strconv.AppendInt(b, int64(j.Releases), 10)
	b = append(b, `,"buries":`...)
	b = strconv.AppendInt(b, int64(j.Buries), 10)
	b = append(b, `,"kicks":`...)
	b = strconv.AppendInt(b, int64(j.Kicks), 10)
	if j.LastReason != "" {
		b = append(b, `,"last_reason":`...)
		b = appendString(b, j.LastReason)
	}
	if j.LastFailed != nil {
		b = append(b, `,"last_failed":`...)
		b = j.LastFailed.appendJSON(b)
	}
	if len(j.History) > 0 {
		b = append(b, `,"history":[`...)
		for i := range j.History {
			if i > 0 {
				b = append(b, ',')
			}
			b = j.History[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if j.EndedAt != nil {
		b = append(b, `,"ended_at":`...)
		b = j.EndedAt.appendJSON(b)
	}
	return append(b, '}')
}

// appendJSON appends a as encoding/json would marshal it.
func (a *Attempt) appendJSON(b []byte) []byte {
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"reserved_at":`...)
	b = a.ReservedAt.appendJSON(b)
	b = append(b, `,"by":`...)
	b = appendString(b, a.By)
	if a.EndedAt != nil {
		b = append(b, `,"ended_at":`...)
		b = a.EndedAt.appendJSON(b)
	}
	if a.Outcome != "" {
		b = append(b, `,"outcome":`...)
		b = appendString(b, a.Outcome)
	}
	if a.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, a.Reason)
	}
	return append(b, '}')
}

// appendJSON appends what MarshalJSON returns.
func (t Time) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = delayq.CeilMilli(t.Time).UTC().AppendFormat(b, TimeLayout)
	return append(b, '"')
}

// appendString quotes s as encoding/json does. Ids, topics, states and
// tokens are plain ASCII and take the loop; anything encoding/json would
// escape (quotes, backslashes, control characters, <, > and &, non-ASCII)
// goes through encoding/json itself, so its rules are not restated here.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat formats f as encoding/json does: the shortest decimal that
// reads back as f, in exponent form only below 1e-6 or from 1e21 on, with
// a two-digit negative exponent shortened (1e-07 → 1e-7). f is finite:
// durations in seconds always are.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

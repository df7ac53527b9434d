package client

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// wireBody sets the body of a put or update: a string when it is valid
// UTF-8, base64 otherwise, so any bytes survive JSON.
func wireBody(b []byte) (body, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// fromWire converts a job on the wire into a delayq.Job.
func fromWire(w *api.Job) (*delayq.Job, error) {
	j := &delayq.Job{
		ID:          w.ID,
		Seq:         w.Seq,
		Topic:       w.Topic,
		State:       delayq.State(w.State),
		Priority:    w.Priority,
		TTR:         time.Duration(w.TTR * float64(time.Second)),
		MaxAttempts: w.MaxAttempts,
		Attempts:    w.Attempts,
		Due:         w.Due.Time,
		Created:     w.Created.Time,
		Reservation: w.Reservation,
	}
	if w.Deadline != nil {
		j.Deadline = w.Deadline.Time
	}
	switch {
	case w.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*w.BodyBase64)
		if err != nil {
			return nil, delayq.Invalid("bad_body", "body_base64", "job %q: %v", w.ID, err)
		}
		j.Body = b
	case w.Body != nil:
		j.Body = []byte(*w.Body)
	default:
		j.Body = []byte{}
	}
	return j, nil
}

// fromWireJobs converts a list of wire jobs.
func fromWireJobs(ws []api.Job) ([]*delayq.Job, error) {
	out := make([]*delayq.Job, 0, len(ws))
	for i := range ws {
		j, err := fromWire(&ws[i])
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

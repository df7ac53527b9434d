package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// TestJobRoundTrip: a job survives FromJob, JSON and ToJob, with its body
// as a string when it is text and as base64 when it is not.
func TestJobRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	for _, body := range [][]byte{[]byte("héllo"), {0xff, 0x00, 0x01}, {}} {
		j := &delayq.Job{
			ID: "a", Seq: 7, Topic: "t", Body: body, Priority: 3, TTR: 1500 * time.Millisecond,
			MaxAttempts: 2, Attempts: 1, Timeouts: 1, Releases: 2, Buries: 3, Kicks: 4,
			State: delayq.StateReserved, Due: at, Created: at,
			Reservation: "7-1", Deadline: at.Add(time.Minute),
		}
		w := FromJob(j)
		if (w.Body != nil) != (len(body) == 0 || body[0] != 0xff) || (w.Body == nil) == (w.BodyBase64 == nil) {
			t.Errorf("FromJob(body %q) = body %v, base64 %v; want exactly one, base64 only for non-text", body, w.Body, w.BodyBase64)
		}
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var back Job
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got, err := back.ToJob()
		if err != nil {
			t.Fatal(err)
		}
		j.Body = append([]byte{}, body...)
		if !reflect.DeepEqual(got.Body, j.Body) || got.ID != j.ID || got.TTR != j.TTR || got.Reservation != j.Reservation ||
			!got.Deadline.Equal(j.Deadline) || !got.Due.Equal(j.Due) || got.State != j.State {
			t.Errorf("round trip of %+v = %+v", j, got)
		}
	}
}

// TestFromJobReservationOnlyWhileReserved: the one rule for when the
// wire carries a reservation.
func TestFromJobReservationOnlyWhileReserved(t *testing.T) {
	j := &delayq.Job{ID: "a", State: delayq.StateReady, Reservation: "1-1", Deadline: time.Now()}
	if w := FromJob(j); w.Reservation != "" || w.Deadline != nil {
		t.Errorf("FromJob of a ready job = %+v, want no reservation or deadline", w)
	}
}

func TestDecodeBody(t *testing.T) {
	s, b64, bad := "x", "eA==", "!!"
	if b, err := DecodeBody(&s, nil); err != nil || string(b) != "x" {
		t.Errorf("DecodeBody(string) = %q, %v", b, err)
	}
	if b, err := DecodeBody(nil, &b64); err != nil || string(b) != "x" {
		t.Errorf("DecodeBody(base64) = %q, %v", b, err)
	}
	if b, err := DecodeBody(nil, nil); err != nil || b != nil {
		t.Errorf("DecodeBody(neither) = %v, %v; want nil (keep the body)", b, err)
	}
	for _, in := range [][2]*string{{&s, &b64}, {nil, &bad}} {
		if _, err := DecodeBody(in[0], in[1]); delayq.CodeOf(err) != delayq.CodeBadBody {
			t.Errorf("DecodeBody(%v, %v) = %v, want bad_body", in[0], in[1], err)
		}
	}
}

func TestCheckUTF8(t *testing.T) {
	for _, ok := range []string{`{"body":"héllo"}`, `{"body":"\ud83d\ude00"}`, `{"body":"\\ud800"}`, `{"body":"\u0041"}`} {
		if err := CheckUTF8([]byte(ok)); err != nil {
			t.Errorf("CheckUTF8(%s) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"{\"body\":\"a\xffb\"}", `{"body":"\ud800"}`, `{"body":"\udc00"}`, `{"body":"\ud800\u0041"}`, `{"body":"\ud800`} {
		if err := CheckUTF8([]byte(bad)); delayq.CodeOf(err) != delayq.CodeBadUTF8 {
			t.Errorf("CheckUTF8(%q) = %v, want bad_utf8", bad, err)
		}
	}
}

// TestDurationRange: numbers too large for a duration are refused as a
// type error the decoder names the field of, never wrapped to negative.
func TestDurationRange(t *testing.T) {
	for _, in := range []string{`1e300`, `-1e300`, `9223372036.854775807`} {
		var r struct{ Delay Duration }
		err := json.Unmarshal([]byte(`{"Delay":`+in+`}`), &r)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Field != "Delay" {
			t.Errorf("delay %s = %v (%v), want an UnmarshalTypeError for Delay", in, time.Duration(r.Delay), err)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"7d"`), &d); err != nil || time.Duration(d) != 7*24*time.Hour {
		t.Errorf(`"7d" = %s, %v`, time.Duration(d), err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil || !strings.Contains(err.Error(), "soon") {
		t.Errorf(`"soon" = %v, want an error naming it`, err)
	}
}

// TestHistoryRoundTrip: a retained job's attempts and end survive
// FromJob, JSON and ToJob, an attempt in progress without end, outcome
// or reason.
func TestHistoryRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	j := &delayq.Job{
		ID: "a", Seq: 7, Topic: "t", Body: []byte("x"), TTR: time.Second, Attempts: 2,
		State: delayq.StateFinished, Due: at, Created: at, Ended: at.Add(3 * time.Second),
		History: []delayq.Attempt{
			{N: 1, Reserved: at, By: "alice", Ended: at.Add(time.Second), Outcome: delayq.OutcomeReleased, Reason: "503"},
			{N: 2, Reserved: at.Add(2 * time.Second), By: "http 127.0.0.1:5", Ended: at.Add(3 * time.Second), Outcome: delayq.OutcomeFinished},
		},
	}
	b, err := json.Marshal(FromJob(j))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ended_at":"2023-11-14T22:13:23.123Z"`, `"history":[{"attempt":1,"reserved_at":"2023-11-14T22:13:20.123Z","by":"alice","ended_at":"2023-11-14T22:13:21.123Z","outcome":"released","reason":"503"},`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("FromJob(retained job) = %s, want it to hold %s", b, want)
		}
	}
	var w Job
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	got, err := w.ToJob()
	if err != nil {
		t.Fatal(err)
	}
	if !got.Ended.Equal(j.Ended) || len(got.History) != len(j.History) {
		t.Fatalf("round trip: ended %s, %d attempts; want %s, %d", got.Ended, len(got.History), j.Ended, len(j.History))
	}
	for i, a := range got.History {
		want := j.History[i]
		if a.N != want.N || !a.Reserved.Equal(want.Reserved) || a.By != want.By || !a.Ended.Equal(want.Ended) || a.Outcome != want.Outcome || a.Reason != want.Reason {
			t.Errorf("round trip: attempt %d = %+v, want %+v", i, a, want)
		}
	}
	live := FromJob(&delayq.Job{ID: "b", State: delayq.StateReserved, History: []delayq.Attempt{{N: 1, Reserved: at, By: "bob"}}})
	if live.EndedAt != nil || live.History[0].EndedAt != nil || live.History[0].Outcome != "" {
		t.Errorf("FromJob(live job, attempt in progress) = ended %v, attempt %+v; want neither ended", live.EndedAt, live.History[0])
	}
}

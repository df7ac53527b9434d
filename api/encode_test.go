package api

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// sampleJobs covers every optional field present and absent, and strings
// encoding/json escapes.
func sampleJobs() []Job {
	t0 := Time{time.Date(2030, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("x", 3600))}
	return []Job{
		{ID: "a", Seq: 1, Topic: "q", State: "ready", Body: ptr("hello"), Priority: 1024, TTR: 60, Due: t0, Created: t0},
		{ID: "b\"<>&\\", Seq: math.MaxUint64, Topic: "t.é", State: "reserved", BodyBase64: ptr("AAEC"), Priority: math.MaxUint32,
			TTR: 0.0000001, MaxAttempts: 3, Attempts: 2, Due: t0, Created: Time{}, Reservation: "7-2", Deadline: &t0,
			Timeouts: 1, Releases: 2, Buries: 3, Kicks: 4, LastReason: "ttr expired\n\u2028\x00", LastFailed: &t0,
			History: []Attempt{{Attempt: 1, ReservedAt: t0, By: "alice", EndedAt: &t0, Outcome: "released", Reason: "503 \"<x>\""}, {Attempt: 2, ReservedAt: t0, By: "http 127.0.0.1:5"}}},
		{ID: "e", State: "finished", Body: ptr("done"), Due: t0, Created: t0, EndedAt: &t0,
			History: []Attempt{{Attempt: 1, ReservedAt: Time{}, By: "é", EndedAt: &t0, Outcome: "finished"}}},
		{ID: "c", Body: ptr("\xff\xfe invalid utf-8"), TTR: 1e21, Due: t0, Created: t0},
		{ID: "d", Body: ptr(""), TTR: 1.5, Due: t0, Created: t0},
	}
}

// TestJobsResponseJSON: AppendJSON writes exactly what encoding/json does.
func TestJobsResponseJSON(t *testing.T) {
	for _, r := range []JobsResponse{{}, {Jobs: []Job{}}, {Jobs: sampleJobs(), Next: "cursor<1>"}} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON =\n%s\nwant\n%s", got, want)
		}
	}
}

// FuzzJobsResponseJSON holds AppendJSON to encoding/json's output for any
// strings, numbers and times.
func FuzzJobsResponseJSON(f *testing.F) {
	f.Add("id", "topic", "body", "reason", uint64(1), int64(0), 60.0, int64(1700000000000), true)
	f.Add("<&>", "é", "\xff", "\u2028", uint64(0), int64(-5), 1e-7, int64(-1), false)
	f.Fuzz(func(t *testing.T, id, topic, body, reason string, seq uint64, n int64, ttr float64, ms int64, text bool) {
		if math.IsNaN(ttr) || math.IsInf(ttr, 0) {
			return // not a duration; encoding/json refuses it too
		}
		at := Time{time.UnixMilli(ms)}
		j := Job{ID: id, Seq: seq, Topic: topic, State: reason, Priority: uint32(seq), TTR: ttr,
			MaxAttempts: int(n), Attempts: int(n / 3), Due: at, Created: at, Reservation: id,
			Timeouts: int(n), Releases: int(n), Buries: int(n), Kicks: int(n), LastReason: reason}
		if text {
			j.Body, j.Deadline = &body, &at
			j.History = []Attempt{{Attempt: int(n), ReservedAt: at, By: topic}, {Attempt: int(n), ReservedAt: at, By: id, EndedAt: &at, Outcome: reason, Reason: body}}
		} else {
			j.BodyBase64, j.LastFailed, j.EndedAt = &body, &at, &at
		}
		r := JobsResponse{Jobs: []Job{j, j}, Next: topic}
		want, err := json.Marshal(r)
		if err != nil {
			t.Skip(err) // a time encoding/json cannot write either (year outside 0-9999)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON =\n%s\nwant\n%s", got, want)
		}
	})
}

package diskstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
)

// sampleJobs are records of every state and shape, the fuzz seeds.
func sampleJobs() []*delayq.Job {
	t0 := time.UnixMilli(1_900_000_000_123)
	return []*delayq.Job{
		{ID: "a", Seq: 1, Topic: "t", State: delayq.StateReady, Due: t0, Created: t0, TTR: time.Second},
		{ID: "order-42", Seq: 1 << 40, Topic: "orderclose", Body: []byte{0, 0xff, '\n'}, Priority: 7, TTR: 2500 * time.Millisecond,
			MaxAttempts: 4, Attempts: 2, State: delayq.StateReserved, Due: t0, Created: t0.Add(-time.Hour), Delay: time.Minute,
			Reservation: "1099511627776-2", Deadline: t0.Add(time.Minute), Timeouts: 1, Releases: 3, Buries: 1, Kicks: 9},
		{ID: "old", Seq: 3, Topic: "x", State: delayq.StateBuried, Due: time.UnixMilli(-5), Created: time.UnixMilli(0)},
		{ID: "far", Seq: 4, Topic: "y", Body: bytes.Repeat([]byte("b"), 300), Priority: 1<<32 - 1, State: delayq.StateDelayed,
			Due: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Delay: -time.Second},
		{ID: "failed", Seq: 5, Topic: "z", State: delayq.StateBuried, Due: t0, Created: t0, Buries: 1,
			LastReason: "payment gateway: 502", LastFailed: t0},
		{ID: "expired", Seq: 6, Topic: "z", State: delayq.StateReady, Due: t0, Created: t0, Timeouts: 1,
			LastReason: delayq.ReasonTTRExpired, LastFailed: t0},
		{ID: "released-silently", Seq: 7, Topic: "z", State: delayq.StateReady, Due: t0, Created: t0, Releases: 1, LastFailed: t0},
		{ID: "with-history", Seq: 8, Topic: "z", State: delayq.StateReserved, Due: t0, Created: t0, Attempts: 2, Releases: 1,
			Reservation: "8-2", Deadline: t0.Add(time.Minute), LastReason: "busy", LastFailed: t0.Add(time.Second),
			History: []delayq.Attempt{
				{N: 1, Reserved: t0, By: "alice", Ended: t0.Add(time.Second), Outcome: delayq.OutcomeReleased, Reason: "busy"},
				{N: 2, Reserved: t0.Add(2 * time.Second), By: "conn 10.0.0.1:5000"},
			}},
		{ID: "finished", Seq: 9, Topic: "z", State: delayq.StateFinished, Due: t0, Created: t0, Attempts: 1, Ended: t0.Add(time.Hour),
			History: []delayq.Attempt{{N: 1, Reserved: t0, Ended: t0.Add(time.Hour), Outcome: delayq.OutcomeFinished}}},
		{ID: "failed-retained", Seq: 10, Topic: "z", State: delayq.StateFailed, Due: t0, Created: t0, Ended: t0, Buries: 1, Body: []byte("kept")},
		{ID: "deleted-retained", Seq: 11, Topic: "z", State: delayq.StateDeleted, Due: t0, Created: t0, Ended: t0},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, j := range sampleJobs() {
		t.Run(j.ID, func(t *testing.T) {
			got, err := decodeRecord(encodeRecord(nil, j))
			if err != nil {
				t.Fatalf("decodeRecord(encodeRecord(%s)) = %v", j.ID, err)
			}
			if diff := cmp.Diff(j, got); diff != "" {
				t.Errorf("decodeRecord(encodeRecord(%s)) differs (-want +got):\n%s", j.ID, diff)
			}
		})
	}
}

// TestRecordWithoutFailureTrailer: a job that never failed encodes without
// the trailer, byte for byte as records written before the trailer
// existed, so those decode unchanged.
func TestRecordWithoutFailureTrailer(t *testing.T) {
	j := sampleJobs()[1]
	failed := *j
	failed.LastReason, failed.LastFailed = "boom", j.Due
	plain, withTrailer := encodeRecord(nil, j), encodeRecord(nil, &failed)
	if !bytes.HasPrefix(withTrailer, plain) || len(withTrailer) <= len(plain) {
		t.Fatalf("a failed job's record %x does not extend the plain record %x", withTrailer, plain)
	}
	got, err := decodeRecord(plain)
	if err != nil || got.LastReason != "" || !got.LastFailed.IsZero() {
		t.Fatalf("decodeRecord(plain) = %+v, %v; want no failure", got, err)
	}
}

// TestRecordVersions: only a job with attempts, an end or a retained
// state takes the second layout; the others are written as before.
func TestRecordVersions(t *testing.T) {
	for _, j := range sampleJobs() {
		want := recordVersion
		if len(j.History) > 0 || !j.Ended.IsZero() {
			want = recordVersion2
		}
		if got := encodeRecord(nil, j)[0]; got != want {
			t.Errorf("%s: record version %d, want %d", j.ID, got, want)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	good := encodeRecord(nil, sampleJobs()[1])
	plain := sampleJobs()[0]
	plainV2 := append([]byte{recordVersion2}, encodeRecord(nil, plain)[1:]...)
	plainV2 = append(plainV2, 0, 0, 0, 0) // reason, failed, ended, no attempts
	retained := sampleJobs()[9]
	retainedV1 := *retained
	retainedV1.Ended = time.Time{}
	long := *sampleJobs()[7]
	long.History = make([]delayq.Attempt, delayq.MaxHistory+1)
	hist := encodeRecord(nil, sampleJobs()[7])
	badOutcome := bytes.Clone(hist)
	// The last attempt ends with outcome 0 then an empty reason.
	badOutcome[len(badOutcome)-2] = byte(len(outcomeBytes))
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{recordVersion + 1}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(bytes.Clone(good), 0)},
		{"empty failure trailer", append(bytes.Clone(good), 0, 0)},
		{"trailing bytes after the failure trailer", append(encodeRecord(nil, sampleJobs()[4]), 0)},
		{"version 2 without anything of version 2", plainV2},
		{"retained state in version 1", append([]byte{recordVersion}, encodeRecord(nil, &retainedV1)[1:len(encodeRecord(nil, &retainedV1))-4]...)},
		{"more attempts than kept", encodeRecord(nil, &long)},
		{"unknown outcome", badOutcome},
		{"truncated history", hist[:len(hist)-1]},
		{"trailing bytes after the history", append(bytes.Clone(hist), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if j, err := decodeRecord(tt.b); err == nil {
				t.Errorf("decodeRecord(%x) = %+v, want an error", tt.b, j)
			}
		})
	}
}

// FuzzDecodeRecord: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to a record that decodes to the same job (varints may
// be non-canonical in the input, so bytes are compared after one cycle).
func FuzzDecodeRecord(f *testing.F) {
	for _, j := range sampleJobs() {
		f.Add(encodeRecord(nil, j))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := decodeRecord(b)
		if err != nil {
			return
		}
		enc := encodeRecord(nil, j)
		again, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("decodeRecord(encodeRecord(decodeRecord(%x))) = %v", b, err)
		}
		if diff := cmp.Diff(j, again); diff != "" {
			t.Fatalf("record %x does not round-trip (-first +second):\n%s", b, diff)
		}
		if enc2 := encodeRecord(nil, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %x then %x", enc, enc2)
		}
	})
}

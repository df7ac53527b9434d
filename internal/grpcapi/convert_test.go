package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/delayq/delayq"
)

// TestDurationBounds: a Duration converts exactly up to the largest
// time.Duration and is refused one nanosecond beyond, either way, as is a
// Duration that is not one (nanos out of range or against the sign of
// seconds). AsDuration alone clamps instead, which would turn a delay of
// 300 years into one of 292.
func TestDurationBounds(t *testing.T) {
	for _, c := range []struct {
		d    *durationpb.Duration
		want time.Duration
		ok   bool
	}{
		{&durationpb.Duration{Seconds: maxDurSeconds, Nanos: int32(maxDurNanos)}, math.MaxInt64, true},
		{&durationpb.Duration{Seconds: maxDurSeconds, Nanos: int32(maxDurNanos) + 1}, 0, false},
		{&durationpb.Duration{Seconds: maxDurSeconds + 1}, 0, false},
		{&durationpb.Duration{Seconds: minDurSeconds, Nanos: int32(minDurNanos)}, math.MinInt64, true},
		{&durationpb.Duration{Seconds: minDurSeconds, Nanos: int32(minDurNanos) - 1}, 0, false},
		{&durationpb.Duration{Seconds: 1, Nanos: -1}, 0, false},
		{&durationpb.Duration{Seconds: 0, Nanos: 1e9}, 0, false},
		{&durationpb.Duration{Seconds: 315576000001}, 0, false},
		{&durationpb.Duration{Seconds: 1, Nanos: 500}, time.Second + 500, true},
		{&durationpb.Duration{Seconds: -1, Nanos: -500}, -time.Second - 500, true},
	} {
		got, err := duration(c.d, delayq.CodeBadDelay, "delay")
		var ve *delayq.ValidationError
		switch {
		case c.ok && (err != nil || *got != c.want):
			t.Errorf("duration(%v) = %v, %v; want %v", c.d, got, err, c.want)
		case !c.ok && (!errors.As(err, &ve) || ve.Code != delayq.CodeBadDelay || ve.Field != "delay"):
			t.Errorf("duration(%v) = %v, %v; want bad_delay on delay", c.d, got, err)
		}
	}
	if d, err := duration(nil, delayq.CodeBadDelay, "delay"); d != nil || err != nil {
		t.Errorf("duration(nil) = %v, %v; want unset", d, err)
	}
}

// FuzzDuration: any Duration either converts to exactly its value in
// nanoseconds, or is refused because it is not a valid Duration or does
// not fit a time.Duration; never clamped, never wrapped.
func FuzzDuration(f *testing.F) {
	f.Add(int64(0), int32(0))
	f.Add(maxDurSeconds, int32(maxDurNanos))
	f.Add(minDurSeconds, int32(minDurNanos))
	f.Add(int64(-1), int32(1))
	f.Fuzz(func(t *testing.T, s int64, n int32) {
		d := &durationpb.Duration{Seconds: s, Nanos: n}
		exact := new(big.Int).Mul(big.NewInt(s), big.NewInt(1e9))
		exact.Add(exact, big.NewInt(int64(n)))
		fits := exact.IsInt64()
		got, err := duration(d, delayq.CodeBadTTR, "ttr")
		if d.CheckValid() != nil || !fits {
			if err == nil {
				t.Fatalf("duration(%v) = %v, want refused", d, *got)
			}
			return
		}
		if err != nil || int64(*got) != exact.Int64() {
			t.Fatalf("duration(%v) = %v, %v; want %v", d, got, err, exact)
		}
	})
}

// TestTimestampRefusesInvalid: a Timestamp outside protobuf's range (year
// 1 to 9999) or with nanos out of range is refused, not clamped; a valid
// one converts exactly.
func TestTimestampRefusesInvalid(t *testing.T) {
	for _, ts := range []*timestamppb.Timestamp{{Seconds: 1, Nanos: -1}, {Seconds: 253402300800}, {Seconds: -62135596801}} {
		if _, err := timestamp(ts, delayq.CodeBadAt, "at"); !errors.Is(err, delayq.ErrInvalid) {
			t.Errorf("timestamp(%v) = %v, want refused", ts, err)
		}
	}
	at := time.Date(2030, 3, 4, 5, 6, 7, 8, time.UTC)
	if got, err := timestamp(timestamppb.New(at), delayq.CodeBadAt, "at"); err != nil || !got.Equal(at) {
		t.Errorf("timestamp(%v) = %v, %v", at, got, err)
	}
}

// TestStatusOfEveryCode: each kind of delayq error is answered its
// status (docs/grpc.md's table), with its code.
func TestStatusOfEveryCode(t *testing.T) {
	for _, c := range []struct {
		err    error
		status connect.Code
		code   string
	}{
		{delayq.ErrNotFound, connect.CodeNotFound, delayq.CodeNotFound},
		{delayq.NotFound("schedule %q not found", "x"), connect.CodeNotFound, delayq.CodeNotFound},
		{fmt.Errorf("put: %w", delayq.ErrExists), connect.CodeAlreadyExists, delayq.CodeExists},
		{delayq.ErrNotReserved, connect.CodeFailedPrecondition, delayq.CodeNotReserved},
		{delayq.ErrState, connect.CodeFailedPrecondition, delayq.CodeBadState},
		{delayq.Invalid(delayq.CodeBadState, "state", "no such state"), connect.CodeInvalidArgument, delayq.CodeBadState},
		{delayq.Invalid(delayq.CodeBadID, "id", "bad"), connect.CodeInvalidArgument, delayq.CodeBadID},
		{delayq.ErrDraining, connect.CodeUnavailable, delayq.CodeDraining},
		{delayq.ErrUnavailable, connect.CodeUnavailable, delayq.CodeUnavailable},
		{&delayq.ReplicationError{Op: "put", Wanted: 1}, connect.CodeUnavailable, delayq.CodeUnavailable},
		{delayq.ErrDiskFull, connect.CodeResourceExhausted, delayq.CodeDiskFull},
		{delayq.ErrForbidden, connect.CodePermissionDenied, delayq.CodeForbidden},
		{&delayq.LimitError{Code: delayq.CodeRateLimited, Reason: "slow down", Retry: true}, connect.CodeResourceExhausted, delayq.CodeRateLimited},
		{&delayq.LimitError{Code: delayq.CodeTopicFull, Reason: "full"}, connect.CodeResourceExhausted, delayq.CodeTopicFull},
		{&refusal{delayq.CodeUnauthorized, "who?"}, connect.CodeUnauthenticated, delayq.CodeUnauthorized},
		{&refusal{delayq.CodeHostNotAllowed, "where?"}, connect.CodePermissionDenied, delayq.CodeHostNotAllowed},
		{errors.New("disk on fire"), connect.CodeInternal, delayq.CodeInternal},
	} {
		ce := toConnect(context.Background(), discard(), "/p", c.err)
		if ce.Code() != c.status || codeIn(ce) != c.code {
			t.Errorf("%v: %v %q, want %v %q", c.err, ce.Code(), codeIn(ce), c.status, c.code)
		}
	}
	if ce := toConnect(context.Background(), discard(), "/p", errors.New("secret path /x")); ce.Message() != "internal error; see the server log" {
		t.Errorf("an internal error's message = %q; its details belong in the log", ce.Message())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ce := toConnect(ctx, discard(), "/p", ctx.Err()); ce.Code() != connect.CodeCanceled {
		t.Errorf("a cancelled call = %v, want canceled", ce.Code())
	}
}

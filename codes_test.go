package delayq

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMessageNamesTheProblem: whatever layers wrapped a sentinel, the
// message for people is the job and the problem.
func TestMessageNamesTheProblem(t *testing.T) {
	layered := fmt.Errorf("diskstore: job %s: %w", Ref{ID: "nosuch"}, ErrNotFound)
	err := ForJob(Ref{ID: "nosuch"}, layered)
	if got := Message(err); got != `job "nosuch" not found` {
		t.Errorf("Message = %q", got)
	}
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, layered) || CodeOf(err) != CodeNotFound {
		t.Errorf("ForJob lost the sentinel or the cause: %v", err)
	}
	if got := Message(Invalid(CodeBadTTR, "ttr", "too short")); got != "ttr: too short" {
		t.Errorf("Message(validation) = %q", got)
	}
	if got := Message(fmt.Errorf("redisstore: put: %w: dial", ErrUnavailable)); got != "store unavailable; the server log says why" {
		t.Errorf("Message(unavailable) = %q", got)
	}
	if ForJob(Ref{ID: "a"}, ErrDraining) != ErrDraining || ForJob(Ref{}, nil) != nil {
		t.Error("ForJob changed an error that is not about a job")
	}
	nf := fmt.Errorf("schedule service: %w", NotFound("schedule %q not found", "nightly"))
	if got := Message(nf); got != `schedule "nightly" not found` || CodeOf(nf) != CodeNotFound || !errors.Is(nf, ErrNotFound) {
		t.Errorf("Message/CodeOf(not found, not a job) = %q/%q, want its own words and not_found", got, CodeOf(nf))
	}
	if SentinelOf(CodeNotReserved) != ErrNotReserved || SentinelOf(CodeBadTTR) != nil {
		t.Error("SentinelOf maps codes wrongly")
	}
}

// FuzzTruncateReason: whatever text a handler's error holds, the reason
// made of it is one the server accepts, and text that is already a good
// reason is kept as it is.
func FuzzTruncateReason(f *testing.F) {
	for _, s := range []string{"", "timeout", "a\x00b\x1b[31m", "\xff\xfe", strings.Repeat("é", MaxReasonLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := TruncateReason(s)
		if err := CheckReason(r); err != nil {
			t.Fatalf("CheckReason(TruncateReason(%q)) = %v", s, err)
		}
		if CheckReason(s) == nil && r != s {
			t.Fatalf("TruncateReason(%q) = %q, changed a good reason", s, r)
		}
	})
}

// A limit's refusal keeps its own code and words, so metrics and the
// original protocol name it (topic_full, not internal).
func TestLimitCodeAndMessage(t *testing.T) {
	err := fmt.Errorf("put: %w", &LimitError{Code: CodeTopicFull, Reason: `topic "t" holds 5 jobs, its policy's max_jobs`})
	if got := CodeOf(err); got != CodeTopicFull {
		t.Errorf("CodeOf = %q, want %q", got, CodeTopicFull)
	}
	if got := Message(err); got != `topic "t" holds 5 jobs, its policy's max_jobs` {
		t.Errorf("Message = %q", got)
	}
	if !errors.Is(err, ErrLimit) {
		t.Error("a LimitError does not match ErrLimit")
	}
}

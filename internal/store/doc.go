package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/delayq/delayq"
)

// Kinds of documents a DocStore keeps. Each kind is its own namespace.
const (
	KindSchedule = "schedule" // store.Schedule (package schedule)
	KindPolicy   = "policy"   // a topic's policy, named by the topic
	KindAlarm    = "alarm"    // an alarm definition
	KindSecret   = "secret"   // the engine's keys (the reservation key)
)

// Doc is a small named document a DocStore keeps whole. The store
// interprets only Name and Rev; Data is the owner's encoding.
type Doc struct {
	Name string
	Rev  uint64
	Data []byte
}

// DocStore keeps small named documents by kind: schedules, topic policies,
// alarms. Every Store is one (Store embeds it); it is named apart so that
// a user of documents alone (package alarm) asks for no more. Writes are durable before they return, as job
// transitions are, and every write is a compare-and-set on Rev, so
// instances sharing a store (redisstore) can race and exactly one wins:
// that is what makes a schedule's tick fire once.
//
// Documents are few and small (a handful of KiB); a DocStore reads them
// whole and may keep every name of a kind in one place.
type DocStore interface {
	// GetDoc returns the document of that kind and name, or an error
	// wrapping ErrDocNotFound.
	GetDoc(ctx context.Context, kind, name string) (*Doc, error)

	// ListDocs returns every document of kind, sorted by name.
	ListDocs(ctx context.Context, kind string) ([]*Doc, error)

	// SaveDoc writes d if the stored document of that kind and name has
	// Rev prev, or, with prev 0, if there is none. d.Rev must be a new
	// revision (NewRev). Otherwise it returns an error wrapping
	// ErrDocConflict and changes nothing.
	SaveDoc(ctx context.Context, kind string, d *Doc, prev uint64) error

	// DeleteDoc removes the document, or returns an error wrapping
	// ErrDocNotFound.
	DeleteDoc(ctx context.Context, kind, name string) error
}

// ErrDocNotFound: no document of that kind has that name. It wraps
// delayq.ErrNotFound so front ends answer it as they answer an unknown job.
var ErrDocNotFound = fmt.Errorf("document not found: %w", delayq.ErrNotFound)

// ErrDocConflict: the document changed since the caller read it (or
// exists when the caller meant to create it). The caller reads it again.
var ErrDocConflict = errors.New("store: document changed concurrently")

// NewRev returns a revision for SaveDoc: random, so a document deleted
// and made again never repeats a revision a slow writer still holds.
func NewRev() uint64 {
	for {
		if r := rand.Uint64(); r != 0 {
			return r
		}
	}
}

// CloneDoc returns a deep copy, so stores hand out documents callers may
// keep.
func CloneDoc(d *Doc) *Doc {
	c := *d
	c.Data = append([]byte(nil), d.Data...)
	return &c
}

// Schedules returns the ScheduleStore kept in ds as documents of
// KindSchedule (JSON of Schedule).
func Schedules(ds DocStore) ScheduleStore { return scheduleDocs{ds} }

type scheduleDocs struct{ ds DocStore }

// schedErr turns a DocStore error into the schedule sentinels, so the
// scheduler's errors name what it keeps.
func schedErr(name string, err error) error {
	switch {
	case errors.Is(err, ErrDocNotFound):
		return fmt.Errorf("%q: %w", name, ErrScheduleNotFound)
	case errors.Is(err, ErrDocConflict):
		return fmt.Errorf("%q: %w", name, ErrScheduleConflict)
	}
	return err
}

func decodeSchedule(d *Doc) (*Schedule, error) {
	var sc Schedule
	if err := json.Unmarshal(d.Data, &sc); err != nil {
		return nil, fmt.Errorf("store: decode schedule %q: %w: %v", d.Name, delayq.ErrUnavailable, err)
	}
	sc.Name, sc.Rev = d.Name, d.Rev
	return &sc, nil
}

func (s scheduleDocs) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	d, err := s.ds.GetDoc(ctx, KindSchedule, name)
	if err != nil {
		return nil, schedErr(name, err)
	}
	return decodeSchedule(d)
}

func (s scheduleDocs) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	ds, err := s.ds.ListDocs(ctx, KindSchedule)
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, 0, len(ds))
	for _, d := range ds {
		sc, err := decodeSchedule(d)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

func (s scheduleDocs) SaveSchedule(ctx context.Context, sc *Schedule, prev uint64) error {
	b, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("store: encode schedule: %w", err)
	}
	return schedErr(sc.Name, s.ds.SaveDoc(ctx, KindSchedule, &Doc{Name: sc.Name, Rev: sc.Rev, Data: b}, prev))
}

func (s scheduleDocs) DeleteSchedule(ctx context.Context, name string) error {
	return schedErr(name, s.ds.DeleteDoc(ctx, KindSchedule, name))
}

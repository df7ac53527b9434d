package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Reservations as clients see them.
//
// A store's reservation token is delayq.ReservationToken(seq, attempts),
// "<seq>-<attempt>": it tells a stale consumer from the current one, but
// anyone who can count can write it. The engine hands out
// "<seq>-<attempt>-<tag>" instead, where tag is the first 128 bits of
// HMAC-SHA256(key, "<seq>-<attempt>") in hex, and checks and strips the
// tag before a token reaches the store. The stores' format and scripts
// stay as they are; only a holder of the key can mint a token.
//
// The key is 256 random bits kept as a document of the store
// (store.KindSecret), created once by compare-and-set, so every instance
// sharing a Redis store, and every restart, signs and checks with the
// same key.

// ReservationKeyDoc names the key's document (kind store.KindSecret).
const ReservationKeyDoc = "reservation-key"

const (
	reservationKeyLen = 32 // bytes of key: HMAC-SHA256's block-size worth of entropy is more than enough
	reservationTagLen = 16 // bytes of tag kept: 128 bits, so a guess succeeds with odds 2^-128
)

// forgedReservation replaces a token whose tag is wrong before the call
// reaches the store. No job ever has it (seqs start at 1 and a reserved
// job has attempts >= 1), so the store answers exactly as it answers a
// stale token: the caller learns nothing a stale token would not tell.
const forgedReservation = "0-0"

// TopicCheck decides whether the caller may act on a job of topic: nil
// for yes, an error (wrapping delayq.ErrForbidden) for no.
type TopicCheck func(topic string) error

type topicCheckKey struct{}

// WithTopicCheck returns a context under which every engine call that
// names a job by id or seq (get, update, delete, kick, reserve-job,
// finish, release, touch, bury, batch finish) first reads the job, asks
// check about its topic, and then acts on that very job by its seq, which
// is unique forever: a job deleted and put again under the same id in
// another topic between the check and the act is not found rather than
// acted on. Front ends attach a check only for principals not allowed on
// every topic, so the usual path reads nothing more.
func WithTopicCheck(ctx context.Context, check TopicCheck) context.Context {
	return context.WithValue(ctx, topicCheckKey{}, check)
}

func topicCheckOf(ctx context.Context) TopicCheck {
	c, _ := ctx.Value(topicCheckKey{}).(TopicCheck)
	return c
}

// sealed is the store as the engine uses it: reservations leave signed,
// come back checked, and calls by job pass the context's TopicCheck. What
// every store does (store.Store, with its documents and due counts) it
// forwards by embedding; the engine keeps the unwrapped store too
// (Engine.base), to ask for the optional interfaces (Notifier, ...) a
// wrapper cannot show.
type sealed struct {
	store.Store
	keys reservationKeys
}

func newSealed(st store.Store) *sealed {
	s := &sealed{Store: st}
	s.keys.ds = st
	return s
}

// reservationKeys loads the key once; a failed load (store unreachable)
// is tried again by the next call.
type reservationKeys struct {
	ds   store.DocStore // the store's documents; nil (a benchmark's bare keys): a key per process
	mu   sync.Mutex     // serialises loading
	key  atomic.Pointer[[]byte]
	macs sync.Pool // of *mac keyed with key
}

func (k *reservationKeys) get(ctx context.Context) ([]byte, error) {
	if p := k.key.Load(); p != nil {
		return *p, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.key.Load(); p != nil {
		return *p, nil
	}
	key, err := loadReservationKey(ctx, k.ds)
	if err != nil {
		return nil, err
	}
	k.macs.New = func() any { return &mac{h: hmac.New(sha256.New, key)} }
	k.key.Store(&key)
	return key, nil
}

// loadReservationKey reads the store's key, or makes one: the first
// instance to save it wins, and the others read the winner's.
func loadReservationKey(ctx context.Context, ds store.DocStore) ([]byte, error) {
	fresh := make([]byte, reservationKeyLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("engine: reservation key: %w", err)
	}
	if ds == nil {
		return fresh, nil
	}
	for range 3 {
		d, err := ds.GetDoc(ctx, store.KindSecret, ReservationKeyDoc)
		if err == nil {
			if len(d.Data) != reservationKeyLen {
				return nil, fmt.Errorf("engine: the stored reservation key has %d bytes, not %d: %w", len(d.Data), reservationKeyLen, delayq.ErrCorrupt)
			}
			return d.Data, nil
		}
		if !errors.Is(err, store.ErrDocNotFound) {
			return nil, err
		}
		err = ds.SaveDoc(ctx, store.KindSecret, &store.Doc{Name: ReservationKeyDoc, Rev: store.NewRev(), Data: fresh}, 0)
		if err == nil {
			return fresh, nil
		}
		if !errors.Is(err, store.ErrDocConflict) {
			return nil, err
		}
		// Another instance saved its key first: read it.
	}
	return nil, fmt.Errorf("engine: reservation key kept changing while it was read: %w", delayq.ErrUnavailable)
}

// mac is a keyed HMAC with buffers for its input and sum: passed to the
// hash through an interface, a token's bytes and the sum would each
// escape to the heap, two objects per tag on every reserve and finish.
type mac struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// tag is the hex HMAC tag of a store token.
func (k *reservationKeys) tag(dst []byte, token string) []byte {
	m := k.macs.Get().(*mac)
	m.h.Reset()
	m.in = append(m.in[:0], token...)
	m.h.Write(m.in)
	full := m.h.Sum(m.sum[:0])
	dst = hex.AppendEncode(dst, full[:reservationTagLen])
	k.macs.Put(m)
	return dst
}

// seal turns a store token into the token clients get.
func (k *reservationKeys) seal(token string) string {
	var buf [96]byte // a store token is two decimal integers: the string below is the only allocation
	b := append(buf[:0], token...)
	b = append(b, '-')
	return string(k.tag(b, token))
}

// open checks a client's token and returns the store's; a token that is
// not one the engine signed becomes forgedReservation. "" stays "".
func (k *reservationKeys) open(token string) string {
	if token == "" {
		return ""
	}
	i := strings.LastIndexByte(token, '-')
	if i < 0 || len(token)-i-1 != 2*reservationTagLen {
		return forgedReservation
	}
	var buf [2 * reservationTagLen]byte
	want := k.tag(buf[:0], token[:i])
	if !hmac.Equal(want, []byte(token[i+1:])) {
		return forgedReservation
	}
	return token[:i]
}

// sealJob signs j's reservation, if it has one. The stores hand out jobs
// of their own (clones), so j may be changed.
func (s *sealed) sealJob(j *delayq.Job) *delayq.Job {
	if j != nil && j.Reservation != "" {
		j.Reservation = s.keys.seal(j.Reservation)
	}
	return j
}

// ref prepares a caller's ref for the store: it loads the key, turns the
// reservation into the store's, and, under a TopicCheck, reads the job,
// checks its topic and names it by seq.
func (s *sealed) ref(ctx context.Context, ref delayq.Ref) (delayq.Ref, error) {
	if _, err := s.keys.get(ctx); err != nil {
		return ref, err
	}
	ref.Reservation = s.keys.open(ref.Reservation)
	check := topicCheckOf(ctx)
	if check == nil {
		return ref, nil
	}
	j, err := s.Store.Get(ctx, delayq.Ref{ID: ref.ID, Seq: ref.Seq})
	if err != nil {
		return ref, err
	}
	if err := check(j.Topic); err != nil {
		return ref, err
	}
	return delayq.Ref{Seq: j.Seq, Reservation: ref.Reservation}, nil
}

// Reserve signs the reservations it hands out. The key is loaded first:
// a job must not be reserved for a caller the engine then cannot answer.
func (s *sealed) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	if _, err := s.keys.get(ctx); err != nil {
		return nil, err
	}
	jobs, err := s.Store.Reserve(ctx, p)
	for _, j := range jobs {
		s.sealJob(j)
	}
	return jobs, err
}

// Tick signs the reservations of the jobs it hands to waiting reserves
// (store.TickParams.Claim). Without the key it hands none: the jobs go
// ready and the reserves reserve them, or fail, themselves.
func (s *sealed) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	if p.Claim != nil {
		if _, err := s.keys.get(ctx); err != nil {
			p.Claim = nil
		}
	}
	res, err := s.Store.Tick(ctx, p)
	if res != nil {
		for _, js := range res.Taken {
			for _, j := range js {
				s.sealJob(j)
			}
		}
	}
	return res, err
}

func (s *sealed) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.ReserveJob(ctx, p)
	return s.sealJob(j), err
}

func (s *sealed) Release(ctx context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.Release(ctx, p)
	return s.sealJob(j), err
}

func (s *sealed) Touch(ctx context.Context, p store.TouchParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.Touch(ctx, p)
	return s.sealJob(j), err
}

func (s *sealed) Bury(ctx context.Context, p store.BuryParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.Bury(ctx, p)
	return s.sealJob(j), err
}

func (s *sealed) KickJob(ctx context.Context, p store.KickJobParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.KickJob(ctx, p)
	return s.sealJob(j), err
}

func (s *sealed) Delete(ctx context.Context, p store.DeleteParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.Delete(ctx, p)
	return s.sealJob(j), err
}

func (s *sealed) Update(ctx context.Context, p store.UpdateParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.Update(ctx, p)
	return s.sealJob(j), err
}

// Get checks the topic of the job it read itself, so it reads once.
func (s *sealed) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	signed := s.readKey(ctx)
	j, err := s.Store.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if check := topicCheckOf(ctx); check != nil {
		if err := check(j.Topic); err != nil {
			return nil, err
		}
	}
	return s.showJob(j, signed), nil
}

// readKey loads the key for a read and reports whether it has one. A
// read must not fail for want of a key: a store opened read-only (a full
// disk) cannot save its first key, and a key that was never saved signed
// no reservation a client could hold, so the read shows jobs without
// their reservations instead (showJob).
func (s *sealed) readKey(ctx context.Context) bool {
	_, err := s.keys.get(ctx)
	return err == nil
}

// showJob signs j's reservation when the key is loaded, and drops it
// otherwise: an unsigned store token must never reach a client.
func (s *sealed) showJob(j *delayq.Job, signed bool) *delayq.Job {
	if j != nil && !signed {
		j.Reservation = ""
		return j
	}
	return s.sealJob(j)
}

// DeleteBatch checks each entry alone: an entry refused by the
// TopicCheck, or naming no job, fails alone, as the store's own entries do.
func (s *sealed) DeleteBatch(ctx context.Context, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	jobs := make([]*delayq.Job, len(ps))
	errs := make([]error, len(ps))
	pass := make([]store.DeleteParams, 0, len(ps))
	idx := make([]int, 0, len(ps))
	for i, p := range ps {
		ref, err := s.ref(ctx, p.Ref)
		if err != nil {
			if !isJobRefusal(err) {
				return nil, nil, err // the whole call: the store is unreachable, the caller gone
			}
			errs[i] = err
			continue
		}
		p.Ref = ref
		pass = append(pass, p)
		idx = append(idx, i)
	}
	if len(pass) == 0 {
		return jobs, errs, nil
	}
	got, gerrs, err := s.Store.DeleteBatch(ctx, pass)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range idx {
		jobs[i], errs[i] = s.sealJob(got[k]), gerrs[k]
	}
	return jobs, errs, nil
}

// isJobRefusal reports whether err is about one job (its absence, or the
// caller's scope on it) rather than about the store.
func isJobRefusal(err error) bool {
	return errors.Is(err, delayq.ErrNotFound) || errors.Is(err, delayq.ErrForbidden)
}

func (s *sealed) List(ctx context.Context, p store.ListParams) (*store.ListResult, error) {
	signed := s.readKey(ctx)
	res, err := s.Store.List(ctx, p)
	if res != nil {
		for _, j := range res.Jobs {
			s.showJob(j, signed)
		}
	}
	return res, err
}

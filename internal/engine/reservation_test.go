package engine

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
	"github.com/delayq/delayq/internal/store/memstore"
)

func putOne(t *testing.T, e *Engine, id, topic string) *delayq.Job {
	t.Helper()
	jobs, err := e.Put(context.Background(), []PutRequest{{ID: id, Topic: topic, Body: []byte("x"), TTR: ptr(delayq.DefaultTTR)}})
	if err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

func reserveOne(t *testing.T, e *Engine, topic string) *delayq.Job {
	t.Helper()
	jobs, err := e.Reserve(context.Background(), ReserveRequest{Topics: []string{topic}})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	return jobs[0]
}

var sealedToken = regexp.MustCompile(`^(\d+-\d+)-[0-9a-f]{32}$`)

// A reservation is the store's <seq>-<attempt> and a 128-bit tag: the
// store's token alone, or with a tag not the engine's, is refused as a
// stale one is, on every call that takes one; the engine's own works.
func TestReservationCannotBeGuessed(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	e := New(st, Config{})
	putOne(t, e, "j", "t")
	j := reserveOne(t, e, "t")
	m := sealedToken.FindStringSubmatch(j.Reservation)
	if m == nil || m[1] != delayq.ReservationToken(j.Seq, 1) {
		t.Fatalf("reservation %q", j.Reservation)
	}
	flipped := []byte(j.Reservation)
	flipped[len(flipped)-1] ^= 1
	for _, res := range []string{m[1], string(flipped), m[1] + "-" + strings.Repeat("0", 32), j.Reservation[:len(j.Reservation)-1], "0-0", "-"} {
		ref := delayq.Ref{ID: "j", Reservation: res}
		_, terr := e.Touch(ctx, ref)
		_, rerr := e.Release(ctx, ReleaseRequest{Ref: ref})
		_, berr := e.Bury(ctx, BuryRequest{Ref: ref})
		_, ferr := e.Finish(ctx, ref)
		_, derr := e.Delete(ctx, ref, false)
		errs, _ := e.FinishBatch(ctx, []delayq.Ref{ref})
		for _, err := range []error{terr, rerr, berr, ferr, derr, errs[0]} {
			if !errors.Is(err, delayq.ErrNotReserved) {
				t.Errorf("reservation %q: %v, want not reserved", res, err)
			}
		}
	}
	// Reads show the sealed token, and it works.
	got, err := e.Get(ctx, delayq.Ref{ID: "j"})
	if err != nil || got.Reservation != j.Reservation {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	list, err := e.List(ctx, ListRequest{Topic: "t"})
	if err != nil || list.Jobs[0].Reservation != j.Reservation {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := e.Touch(ctx, delayq.Ref{ID: "j", Reservation: j.Reservation}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Finish(ctx, delayq.Ref{ID: "j", Reservation: j.Reservation}); err != nil {
		t.Fatal(err)
	}
	// The store itself kept its own format.
	if d, err := st.GetDoc(ctx, store.KindSecret, ReservationKeyDoc); err != nil || len(d.Data) != reservationKeyLen {
		t.Fatalf("the key's document: %v, %v", d, err)
	}
}

// Instances sharing a store share the key (the first saves it, the
// others read it), and a restart keeps it, so a consumer's reservation
// works on any instance and after a restart.
func TestReservationKeySharedAndKept(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := diskstore.Open(dir, diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := New(st, Config{}), New(st, Config{})
	putOne(t, a, "j", "t")
	j := reserveOne(t, a, "t")
	if _, err := b.Touch(ctx, delayq.Ref{ID: "j", Reservation: j.Reservation}); err != nil {
		t.Fatalf("another engine over the same store refused the reservation: %v", err)
	}
	st.Close()
	st, err = diskstore.Open(dir, diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := New(st, Config{})
	if _, err := c.Finish(ctx, delayq.Ref{ID: "j", Reservation: j.Reservation}); err != nil {
		t.Fatalf("after a restart the reservation was refused: %v", err)
	}
}

// Under a TopicCheck every call by job reads the job, asks about its
// topic, and acts on that job by seq. The check here plays the race the
// HTTP guard lost: while it runs, the job is deleted and put again under
// the same id in a topic the caller may not touch. The call must then
// find no job, and the new one must stay as it was.
func TestTopicCheckActsOnTheCheckedJob(t *testing.T) {
	ctx := context.Background()
	e := New(memstore.New(), Config{})
	for _, call := range []struct {
		name string
		do   func(ctx context.Context, res string) error
	}{
		{"delete", func(ctx context.Context, _ string) error {
			_, err := e.Delete(ctx, delayq.Ref{ID: "x"}, true)
			return err
		}},
		{"kick", func(ctx context.Context, _ string) error { _, err := e.KickJob(ctx, delayq.Ref{ID: "x"}); return err }},
		{"update", func(ctx context.Context, _ string) error {
			_, err := e.Update(ctx, UpdateRequest{Ref: delayq.Ref{ID: "x"}, Body: []byte("changed")})
			return err
		}},
		{"reserve-job", func(ctx context.Context, _ string) error {
			_, err := e.ReserveJob(ctx, delayq.Ref{ID: "x"}, "test")
			return err
		}},
		{"finish", func(ctx context.Context, res string) error {
			_, err := e.Finish(ctx, delayq.Ref{ID: "x", Reservation: res})
			return err
		}},
		{"batch finish", func(ctx context.Context, res string) error {
			errs, err := e.FinishBatch(ctx, []delayq.Ref{{ID: "x", Reservation: res}})
			return errors.Join(err, errs[0])
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			putOne(t, e, "x", "allowed")
			res := ""
			if strings.Contains(call.name, "finish") {
				res = reserveOne(t, e, "allowed").Reservation
			}
			raced := false
			check := func(topic string) error {
				if topic != "allowed" {
					return delayq.ErrForbidden
				}
				if !raced {
					raced = true
					if _, err := e.Delete(context.Background(), delayq.Ref{ID: "x"}, true); err != nil {
						t.Fatal(err)
					}
					putOne(t, e, "x", "victim")
				}
				return nil
			}
			err := call.do(WithTopicCheck(ctx, check), res)
			if !errors.Is(err, delayq.ErrNotFound) {
				t.Errorf("%s = %v, want not found", call.name, err)
			}
			j, err := e.Get(ctx, delayq.Ref{ID: "x"})
			if err != nil || j.Topic != "victim" || string(j.Body) != "x" || j.State != delayq.StateReady {
				t.Errorf("the job in the other topic: %+v, %v", j, err)
			}
			// Asked about the other topic, the check refuses it.
			if err := call.do(WithTopicCheck(ctx, check), res); !errors.Is(err, delayq.ErrForbidden) {
				t.Errorf("%s on the other topic's job = %v, want forbidden", call.name, err)
			}
			if _, err := e.Get(WithTopicCheck(ctx, check), delayq.Ref{ID: "x"}); !errors.Is(err, delayq.ErrForbidden) {
				t.Errorf("get of the other topic's job = %v, want forbidden", err)
			}
			if _, err := e.Delete(ctx, delayq.Ref{ID: "x"}, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkReservationTag measures what signing a reservation on reserve
// and checking it on finish add to each job.
func BenchmarkReservationTag(b *testing.B) {
	k := &reservationKeys{}
	if _, err := k.get(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tok := k.seal(delayq.ReservationToken(uint64(i)+1, 1))
		if k.open(tok) == forgedReservation {
			b.Fatal("own token refused")
		}
	}
}

// FuzzOpenReservation: a reservation is client input (an HTTP or gRPC
// field, any bytes). Opening one never panics; "" stays "" (no
// reservation); anything else opens to the store token it was sealed
// from, or to forgedReservation, which no job holds. A token the fuzzer
// makes up opens only if it is exactly the seal of the store token before
// its last '-', so a guess cannot get through, whatever its shape; and a
// sealed token with any one byte changed is forged.
func FuzzOpenReservation(f *testing.F) {
	k := &reservationKeys{}
	if _, err := k.get(context.Background()); err != nil {
		f.Fatal(err)
	}
	sealed := k.seal("42-3")
	for _, s := range []string{"", "-", "0-0", "42-3", sealed, sealed + "0", sealed[:len(sealed)-1],
		"42-3-" + strings.Repeat("0", 32), "42-3-" + strings.Repeat("g", 32), "x", "--", "42-3-" + strings.ToUpper(sealed[5:])} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		got := k.open(token)
		switch {
		case token == "":
			if got != "" {
				t.Fatalf("open(\"\") = %q, want \"\"", got)
			}
			return
		case got == forgedReservation:
		default:
			if k.seal(got) != token {
				t.Fatalf("open(%q) = %q, but that store token seals to %q: a token the engine never signed got through", token, got, k.seal(got))
			}
		}
		// Any store token sealed, then one byte of its tag changed, is forged.
		own := k.seal(token)
		if k.open(own) != token {
			t.Fatalf("open(seal(%q)) = %q, want it back", token, k.open(own))
		}
		b := []byte(own)
		b[len(b)-1-len(token)%(2*reservationTagLen)] ^= 0x01
		if k.open(string(b)) != forgedReservation {
			t.Fatalf("open(%q), a sealed token with a tag byte changed, = %q, want forged", b, k.open(string(b)))
		}
	})
}

package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// testDocs pins store.DocStore: compare-and-set on Rev, kinds kept apart,
// not found, list order, deep copies, binary data, and durability across
// a reopen.
func testDocs(t *testing.T, f Factory) {
	open := func(t *testing.T) (store.Store, store.DocStore) {
		s := f.Open(t)
		return s, s
	}
	doc := func(name, data string) *store.Doc {
		return &store.Doc{Name: name, Rev: store.NewRev(), Data: []byte(data)}
	}

	t.Run("CompareAndSet", func(t *testing.T) {
		s, ds := open(t)
		defer s.Close()
		ctx := t.Context()
		if _, err := ds.GetDoc(ctx, store.KindPolicy, "a"); !errors.Is(err, store.ErrDocNotFound) || !errors.Is(err, delayq.ErrNotFound) {
			t.Fatalf("GetDoc(unknown) = %v, want ErrDocNotFound wrapping ErrNotFound", err)
		}
		a := doc("a", "one\x00\xff")
		if err := ds.SaveDoc(ctx, store.KindPolicy, a, 0); err != nil {
			t.Fatalf("SaveDoc(create) = %v", err)
		}
		if err := ds.SaveDoc(ctx, store.KindPolicy, doc("a", "x"), 0); !errors.Is(err, store.ErrDocConflict) {
			t.Fatalf("SaveDoc(create again) = %v, want ErrDocConflict", err)
		}
		if err := ds.SaveDoc(ctx, store.KindPolicy, doc("a", "x"), a.Rev+1); !errors.Is(err, store.ErrDocConflict) {
			t.Fatalf("SaveDoc(stale rev) = %v, want ErrDocConflict", err)
		}
		b := doc("a", "two")
		if err := ds.SaveDoc(ctx, store.KindPolicy, b, a.Rev); err != nil {
			t.Fatalf("SaveDoc(replace) = %v", err)
		}
		// Two racers read rev a; only the first write wins.
		if err := ds.SaveDoc(ctx, store.KindPolicy, doc("a", "three"), a.Rev); !errors.Is(err, store.ErrDocConflict) {
			t.Fatalf("second SaveDoc on the same rev = %v, want ErrDocConflict (only one racer wins)", err)
		}
		got, err := ds.GetDoc(ctx, store.KindPolicy, "a")
		if err != nil {
			t.Fatalf("GetDoc = %v", err)
		}
		if d := cmp.Diff(b, got); d != "" {
			t.Fatalf("GetDoc after replace (-want +got):\n%s", d)
		}
		got.Data[0] = 'X' // a copy: the store's document must not change
		if again, _ := ds.GetDoc(ctx, store.KindPolicy, "a"); string(again.Data) != "two" {
			t.Fatalf("changing a returned document changed the stored one: %q", again.Data)
		}
		// Another kind is another namespace.
		if _, err := ds.GetDoc(ctx, store.KindAlarm, "a"); !errors.Is(err, store.ErrDocNotFound) {
			t.Fatalf("GetDoc(other kind) = %v, want ErrDocNotFound", err)
		}
		if err := ds.SaveDoc(ctx, store.KindAlarm, doc("a", "alarm"), 0); err != nil {
			t.Fatalf("SaveDoc(same name, other kind) = %v", err)
		}
		if err := ds.DeleteDoc(ctx, store.KindAlarm, "a"); err != nil {
			t.Fatalf("DeleteDoc(other kind) = %v", err)
		}
		if again, err := ds.GetDoc(ctx, store.KindPolicy, "a"); err != nil || string(again.Data) != "two" {
			t.Fatalf("deleting another kind's document touched this one: %v, %v", again, err)
		}
		if err := ds.DeleteDoc(ctx, store.KindAlarm, "a"); !errors.Is(err, store.ErrDocNotFound) {
			t.Fatalf("DeleteDoc again = %v, want ErrDocNotFound", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		s, ds := open(t)
		defer s.Close()
		ctx := t.Context()
		if l, err := ds.ListDocs(ctx, store.KindAlarm); err != nil || len(l) != 0 {
			t.Fatalf("ListDocs(empty) = %v, %v", l, err)
		}
		for _, n := range []string{"b", "a:x", "c", "a"} {
			if err := ds.SaveDoc(ctx, store.KindAlarm, doc(n, "d-"+n), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := ds.SaveDoc(ctx, store.KindPolicy, doc("zz", "p"), 0); err != nil {
			t.Fatal(err)
		}
		if err := ds.DeleteDoc(ctx, store.KindAlarm, "c"); err != nil {
			t.Fatal(err)
		}
		l, err := ds.ListDocs(ctx, store.KindAlarm)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range l {
			names = append(names, d.Name+"="+string(d.Data))
		}
		if d := cmp.Diff([]string{"a=d-a", "a:x=d-a:x", "b=d-b"}, names); d != "" {
			t.Fatalf("ListDocs (-want +got):\n%s", d)
		}
	})

	t.Run("Durable", func(t *testing.T) {
		if f.Reopen == nil {
			t.Skip("not a durable store")
		}
		s, ds := open(t)
		a := doc("a", "kept")
		if err := ds.SaveDoc(t.Context(), store.KindPolicy, a, 0); err != nil {
			t.Fatalf("SaveDoc = %v", err)
		}
		s = f.Reopen(t, s)
		defer s.Close()
		got, err := s.GetDoc(t.Context(), store.KindPolicy, "a")
		if err != nil {
			t.Fatalf("GetDoc after reopen = %v", err)
		}
		if d := cmp.Diff(a, got); d != "" {
			t.Fatalf("document after reopen (-want +got):\n%s", d)
		}
	})
}

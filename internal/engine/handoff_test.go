package engine

import (
	"testing"

	"github.com/delayq/delayq"
)

// TestClaimTakesWaitersByTheirTake: a timer step claims, oldest first,
// the waiters whose takes cover the jobs it makes ready, as a wake-up
// would signal them, and no more; a claimed waiter hears nothing until
// the step hands it its jobs, and one whose reserve left meanwhile gets
// none: the step gets them back to give back.
func TestClaimTakesWaitersByTheirTake(t *testing.T) {
	ws := newWaiters()
	one := ws.add([]string{"a"}, 1, "one")
	many := ws.add([]string{"a", "b"}, 16, "many")
	late := ws.add([]string{"a"}, 1, "late")
	other := ws.add([]string{"b"}, 1, "other")

	claimed := ws.claim(map[string]int{"a": 3})
	if len(claimed) != 2 || claimed[0] != one || claimed[1] != many {
		t.Fatalf("claim(a: 3) took %d waiters, want the oldest two, whose takes (1 + 16) cover 3", len(claimed))
	}
	if n := ws.count("a"); n != 1 {
		t.Errorf("waiters left on a = %d, want 1 (late)", n)
	}
	if n := ws.count("b"); n != 1 {
		t.Errorf("waiters left on b = %d, want 1: a claimed waiter leaves every list", n)
	}
	ws.wake("a", 1) // a put while the step runs: the claimed are not on the list
	select {
	case <-late.ch:
	default:
		t.Fatal("a wake-up during the claim did not reach the unclaimed waiter")
	}
	select {
	case <-one.ch:
		t.Fatal("a claimed waiter was signalled before its hand-off")
	default:
	}

	job := &delayq.Job{ID: "j", Topic: "a", State: delayq.StateReserved}
	if back := ws.handOff(one, []*delayq.Job{job}); back != nil {
		t.Fatalf("handOff to a waiting reserve returned %d jobs to give back, want none", len(back))
	}
	<-one.ch
	if got := ws.takeHanded(one); len(got) != 1 || got[0] != job {
		t.Fatalf("the waiter's handed jobs = %v, want [j]", got)
	}

	if topic, n, handed := ws.remove(many); topic != "" || n != 0 || handed != nil {
		t.Fatalf("remove of a claimed waiter = %q, %d, %v; want nothing to pass on", topic, n, handed)
	}
	if back := ws.handOff(many, []*delayq.Job{job}); len(back) != 1 {
		t.Fatalf("handOff to a reserve that left returned %d jobs, want its 1 to give back", len(back))
	}
	select {
	case <-many.ch:
		t.Fatal("a reserve that left was signalled")
	default:
	}
	ws.remove(other)
}

package store

import (
	"context"
	"testing"
)

func TestFanoutNeverBlocksOnAFullSubscriber(t *testing.T) {
	f := NewFanout(1)
	slow := f.Subscribe(context.Background())
	fast := f.Subscribe(context.Background())
	f.Send(Event{Topic: "a"})
	<-fast
	f.Send(Event{Topic: "b"}) // slow's buffer is full: dropped for it, not blocked on
	if e := <-fast; e.Topic != "b" {
		t.Fatalf("fast subscriber got %q, want b", e.Topic)
	}
	if e := <-slow; e.Topic != "a" {
		t.Fatalf("slow subscriber got %q, want a", e.Topic)
	}
	if n := len(slow); n != 0 {
		t.Fatalf("slow subscriber holds %d more events, want the second dropped", n)
	}
}

func TestFanoutClosesOnContextAndClose(t *testing.T) {
	f := NewFanout(4)
	ctx, cancel := context.WithCancel(context.Background())
	gone := f.Subscribe(ctx)
	stay := f.Subscribe(context.Background())
	cancel()
	if _, ok := <-gone; ok {
		t.Fatal("a cancelled subscriber's channel got an event, want it closed")
	}
	if n := f.Subscribers(); n != 1 {
		t.Fatalf("Subscribers() = %d after one cancel, want 1", n)
	}
	f.Close()
	if _, ok := <-stay; ok {
		t.Fatal("channel open after Close")
	}
	if _, ok := <-f.Subscribe(context.Background()); ok {
		t.Fatal("a subscriber after Close got an open channel")
	}
}

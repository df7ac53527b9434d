package diskstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/delayq/delayq"
)

// counts are a topic's counters and pause, stored under its C key and
// rewritten (plain Set of the new values) by every batch that changes them.
type counts struct {
	delayed, ready, reserved, buried, urgent int
	paused                                   time.Time
}

func (c *counts) empty() bool {
	return c.delayed == 0 && c.ready == 0 && c.reserved == 0 && c.buried == 0 && c.paused.IsZero()
}

// add counts j in (d = 1) or out (d = -1).
func (c *counts) add(j *delayq.Job, d int) {
	switch j.State {
	case delayq.StateDelayed:
		c.delayed += d
	case delayq.StateReserved:
		c.reserved += d
	case delayq.StateBuried:
		c.buried += d
	case delayq.StateReady:
		c.ready += d
		if j.Priority < delayq.DefaultPriority {
			c.urgent += d
		}
	}
}

// encodeCounts: the five counters as uvarints, then the pause end.
func encodeCounts(c *counts) []byte {
	b := make([]byte, 0, 16)
	for _, n := range []int{c.delayed, c.ready, c.reserved, c.buried, c.urgent} {
		b = binary.AppendUvarint(b, uint64(n))
	}
	return appendTime(b, c.paused)
}

func decodeCounts(b []byte) (counts, error) {
	d := decoder{b: b}
	c := counts{delayed: d.count(), ready: d.count(), reserved: d.count(), buried: d.count(), urgent: d.count()}
	c.paused = d.time()
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return c, fmt.Errorf("%w: counters: %v", errCorrupt, d.err)
	}
	return c, nil
}

// change is one job's transition: old nil for a new job, new nil for a
// deleted one.
type change struct{ old, new *delayq.Job }

// txn collects one transition: the Pebble batch and what memory must do
// once Pebble has accepted it.
type txn struct {
	s       *Store
	b       *pebble.Batch
	seq     uint64             // last seq assigned, including this txn's puts
	counts  map[string]*counts // new counters of the topics touched
	changes []change
	popped  []*entry // entries taken out of memory while choosing jobs; put back on abort

	key   []byte    // scratch for the keys stage builds (the batch copies them)
	spare []*counts // counters of earlier txns, for topicCounts to reuse
	exp   *expiry   // what memory knows of the expiry index once applied (Tick's expire); nil: unchanged
}

// newTxn starts a transition. It reuses the txn (and its batch) the last
// one released: a fresh txn, its map and counters were a seventh of the
// objects a reserve + delete allocated. Requires mu.
func (s *Store) newTxn() *txn {
	t := s.txnFree
	s.txnFree = nil
	if t == nil {
		t = &txn{s: s, counts: make(map[string]*counts)}
	}
	b := s.txnBatch
	if b == nil {
		b = s.db.NewBatch()
	}
	s.txnBatch = nil
	t.b, t.seq = b, s.seq
	return t
}

// release keeps the txn's batch, emptied, for the next txn (see commit.go,
// batch reuse), and the txn itself, emptied; txns run one at a time under
// mu, so the slots are free. Requires mu.
func (t *txn) release() {
	t.b.Reset()
	t.s.txnBatch, t.b = t.b, nil
	for name, c := range t.counts {
		t.spare = append(t.spare, c)
		delete(t.counts, name)
	}
	clear(t.changes) // drop the jobs; the next txn must not keep them alive
	t.changes = t.changes[:0]
	clear(t.popped)
	t.popped = t.popped[:0]
	t.exp = nil
	if cap(t.changes) > 1024 { // a big batch's slices are not kept for every later txn
		t.changes, t.popped = nil, nil
	}
	t.s.txnFree = t
}

func (t *txn) empty() bool { return len(t.changes) == 0 && len(t.counts) == 0 }

// topicCounts returns the txn's working copy of a topic's counters.
func (t *txn) topicCounts(name string) *counts {
	c := t.counts[name]
	if c == nil {
		if n := len(t.spare); n > 0 {
			c, t.spare = t.spare[n-1], t.spare[:n-1]
			*c = counts{}
		} else {
			c = new(counts)
		}
		if tp := t.s.topics[name]; tp != nil {
			*c = tp.counts
		}
		t.counts[name] = c
	}
	return c
}

// stage writes the keys of one transition into the batch.
//
// The S, X and G keys go with SingleDelete: each is Set exactly once
// before it is deleted (S at the put; X and G name the state, the sort
// key and the seq, and a transition always deletes the old state's keys
// before it sets the new ones, even when they are equal). So when a set
// and its single delete meet in a flush or compaction both vanish, and a
// short-lived job leaves only its J tombstone behind instead of four
// (the J record is rewritten by every transition, so it needs Delete).
//
// A retained job (retain.go) is staged as a job in a state of its own:
// a delete that keeps the job stages (live, retained), Tick's expiry
// (retained, nil). Its E key, Set once when it is retained, goes with
// SingleDelete too; it is in no counter.
func (t *txn) stage(old, new *delayq.Job) { t.stageAs(old, new, recWhole) }

// How a staged transition writes the job's record (overlay.go).
const (
	recWhole   = iota // the whole record
	recOverlay        // none; the reserve's changes go into the X value
	recKept           // none; the X key of the new state says it all
)

// stageReserve stages a reserve that built new from old: its record is
// left as it is and the reserve's changes go into its X value (an
// overlay), when overlaid says they can.
func (t *txn) stageReserve(old, new *delayq.Job) {
	if overlaid(old, new) {
		t.stageAs(old, new, recOverlay)
	} else {
		t.stageAs(old, new, recWhole)
	}
}

func (t *txn) stageAs(old, new *delayq.Job, rec int) {
	t.changes = append(t.changes, change{old, new})
	if old != nil {
		t.key = appendIndexKey(t.key[:0], old)
		t.b.SingleDelete(t.key, nil)
		switch {
		case old.State == delayq.StateDelayed:
			t.key = appendDueKey(t.key[:0], old.Due.UnixMilli(), old.Seq)
			t.b.SingleDelete(t.key, nil)
		case old.State.Retained():
			t.b.SingleDelete(expiryKey(old), nil)
		}
		if !old.State.Retained() {
			t.topicCounts(old.Topic).add(old, -1)
		}
	}
	if new == nil {
		t.key = appendJobKey(t.key[:0], old.ID)
		t.b.Delete(t.key, nil)
		t.key = appendSeqKey(t.key[:0], old.Seq)
		t.b.SingleDelete(t.key, nil)
		return
	}
	// The batch copies keys and values, so the scratch buffers serve
	// every key and record the store encodes (the mutex is held).
	if old == nil {
		t.key = appendSeqKey(t.key[:0], new.Seq)
		k := len(t.key)
		t.key = append(t.key, new.ID...)
		t.b.Set(t.key[:k], t.key[k:], nil)
	}
	t.key = appendIndexKey(t.key[:0], new)
	k := len(t.key)
	if rec == recOverlay {
		t.key = appendOverlayValue(t.key, new)
	} else {
		t.key = appendIndexValue(t.key, new)
	}
	if rec == recWhole {
		t.s.recBuf = sealRecord(t.s.recBuf[:0], new)
		t.b.Set(appendJobKey(t.key[len(t.key):], new.ID), t.s.recBuf, nil)
	}
	t.b.Set(t.key[:k], t.key[k:], nil)
	switch {
	case new.State == delayq.StateDelayed:
		t.key = appendDueKey(t.key[:0], new.Due.UnixMilli(), new.Seq)
		k := len(t.key)
		t.key = append(t.key, new.ID...)
		t.b.Set(t.key[:k], t.key[k:], nil)
	case new.State.Retained():
		t.b.Set(expiryKey(new), expiryValue(new), nil)
		return
	}
	t.topicCounts(new.Topic).add(new, 1)
}

// apply makes memory match the batch Pebble accepted. Requires mu.
func (t *txn) apply() {
	s := t.s
	if t.exp != nil {
		s.exp = *t.exp
	}
	for _, c := range t.changes {
		if c.old != nil && c.new != nil {
			if e := s.entries[c.old.Seq]; e != nil && s.move(e, c.new) {
				continue
			}
		}
		if c.old != nil {
			s.unindex(c.old)
		}
		if c.new != nil {
			s.index(c.new)
			if c.new.State.Retained() {
				s.exp.note(c.new.Ended.UnixMilli())
			}
		}
	}
	for name, c := range t.counts {
		tp := s.topic(name)
		tp.counts = *c
		if c.empty() && tp.byPri.Len() == 0 {
			delete(s.topics, name)
		}
	}
	s.seq = t.seq
	s.near.trim(s)
}

// abort drops a txn that was not applied, putting back what it took.
func (t *txn) abort() {
	t.restore()
	t.release()
}

func (t *txn) restore() {
	for _, e := range t.popped {
		t.s.enqueue(e)
	}
	t.popped = nil
}

// unindex removes a job's old state from memory. Requires mu.
func (s *Store) unindex(j *delayq.Job) {
	e := s.entries[j.Seq]
	if e == nil {
		if j.State == delayq.StateDelayed {
			s.near.forget(dueKey(j))
		}
		return
	}
	s.drop(e)
}

// drop takes an entry out of every structure holding it. Requires mu.
func (s *Store) drop(e *entry) {
	delete(s.entries, e.seq)
	delete(s.byID, e.id)
	s.hot -= e.size
	s.dequeue(e)
}

// dequeue takes an entry out of the queue(s) of its state; one that is in
// none (taken) is left as it is. Requires mu.
func (s *Store) dequeue(e *entry) {
	switch e.state {
	case stReady:
		if tp := s.topics[e.topic]; tp != nil {
			tp.byPri.remove(e)
			tp.byDue.remove(e)
		}
	case stReserved:
		s.reserved.remove(e)
	case stDelayed:
		s.near.q.remove(e)
	}
}

// reinsert puts back an entry that drop took out. Requires mu.
func (s *Store) reinsert(e *entry) {
	s.entries[e.seq] = e
	s.byID[e.id] = e
	s.hot += e.size
	s.enqueue(e)
}

// enqueue puts an entry into the queue(s) of its state. Requires mu.
func (s *Store) enqueue(e *entry) {
	switch e.state {
	case stReady:
		tp := s.topic(e.topic)
		tp.byPri.add(e)
		tp.byDue.add(e)
	case stReserved:
		s.reserved.add(e)
	case stDelayed:
		s.near.q.add(e)
	}
}

// index adds a job's new state to memory: ready and reserved jobs always,
// delayed ones only if they fall within the near future. Requires mu.
func (s *Store) index(j *delayq.Job) {
	e := &entry{seq: j.Seq, id: j.ID, topic: j.Topic, state: stateByte(j.State), pri: j.Priority, due: j.Due.UnixMilli()}
	switch j.State {
	case delayq.StateReady:
		e.at = e.due
	case delayq.StateReserved:
		e.at = j.Deadline.UnixMilli()
	case delayq.StateDelayed:
		e.at = e.due
		if !s.near.place(dueKey(j), s.clock.Last().UnixMilli()) {
			return
		}
	default:
		return
	}
	size := hotSize(j)
	if s.hot+size > s.hotMax && j.State == delayq.StateDelayed {
		s.spill(s.hot + size - s.hotMax)
	}
	if s.hot+size <= s.hotMax {
		e.job, e.size = j, size
	}
	s.reinsert(e)
}

// take removes an entry from its queues while a txn chooses jobs,
// remembering it in case the txn aborts. It stays in the maps (by seq and
// id) until apply moves it to its new state (move) or drops it. Requires
// mu.
func (t *txn) take(e *entry) {
	t.s.dequeue(e)
	t.popped = append(t.popped, e)
}

// move is index for a job whose entry e memory holds already, when its
// new state is one memory always holds (ready or reserved: a reserve, a
// release without delay, a touch, a timeout): the entry changes in place
// and keeps its map slots, where unindex + index deleted it from both
// maps and inserted a new one (a reserve + delete spent a tenth of its CPU
// in those map operations). It reports false, changing nothing, for any
// other new state. Requires mu.
func (s *Store) move(e *entry, j *delayq.Job) bool {
	if (j.State != delayq.StateReady && j.State != delayq.StateReserved) || e.id != j.ID || e.topic != j.Topic {
		return false
	}
	s.dequeue(e)
	s.hot -= e.size
	e.state, e.pri, e.due = stateByte(j.State), j.Priority, j.Due.UnixMilli()
	e.at = e.due
	if j.State == delayq.StateReserved {
		e.at = j.Deadline.UnixMilli()
	}
	e.job, e.size = nil, 0
	if size := hotSize(j); s.hot+size <= s.hotMax {
		e.job, e.size = j, size
	}
	s.hot += e.size
	s.enqueue(e)
	return true
}

package diskstore

import (
	"container/heap"
	"unsafe"

	"github.com/delayq/delayq"
)

// entry is what memory keeps of a ready, reserved or near-future delayed
// job: enough to order it and to find its record, and, while the hot
// budget allows, the record itself (job), so reserve, finish and the
// timer read nothing from Pebble.
type entry struct {
	seq   uint64
	id    string
	topic string
	state byte
	pri   uint32
	at    int64       // ms: due (ready, delayed) or deadline (reserved)
	due   int64       // ms: the job's Due (for a topic's oldest ready job)
	pos   [2]int      // index in each heap holding the entry; slot 0 or 1
	job   *delayq.Job // the record, or nil when it was spilled (read it from Pebble); never modified
	size  int         // bytes job is counted for in the hot budget
}

// hotSize is what a job kept in memory is counted for: its variable parts
// (its attempts too: up to delayq.MaxHistory of them) and a fixed
// allowance for the Job and entry structs and map slots.
func hotSize(j *delayq.Job) int {
	n := len(j.Body) + 2*len(j.ID) + len(j.Topic) + 320
	for i := range j.History {
		n += attemptSize + len(j.History[i].By) + len(j.History[i].Reason)
	}
	return n
}

// attemptSize is the fixed size of a delayq.Attempt in memory.
const attemptSize = int(unsafe.Sizeof(delayq.Attempt{}))

// queue is an indexed binary heap of entries: it can remove any entry in
// O(log n), so a deleted or changed job leaves no stale entry behind and
// Tick never sees it. An entry may sit in two queues if they use different
// slots.
type queue struct {
	es   []*entry
	less func(a, b *entry) bool
	slot int
}

func (q *queue) Len() int           { return len(q.es) }
func (q *queue) Less(i, j int) bool { return q.less(q.es[i], q.es[j]) }
func (q *queue) Swap(i, j int) {
	q.es[i], q.es[j] = q.es[j], q.es[i]
	q.es[i].pos[q.slot] = i
	q.es[j].pos[q.slot] = j
}

// Push and Pop are for container/heap only; use add, remove, top and pop.
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.pos[q.slot] = len(q.es)
	q.es = append(q.es, e)
}

func (q *queue) Pop() any {
	n := len(q.es) - 1
	e := q.es[n]
	q.es[n] = nil
	q.es = q.es[:n]
	e.pos[q.slot] = -1
	return e
}

func (q *queue) add(e *entry) { heap.Push(q, e) }

func (q *queue) remove(e *entry) {
	if i := e.pos[q.slot]; i >= 0 && i < len(q.es) && q.es[i] == e {
		heap.Remove(q, i)
	}
}

func (q *queue) top() *entry {
	if len(q.es) == 0 {
		return nil
	}
	return q.es[0]
}

func (q *queue) pop() *entry { return heap.Pop(q).(*entry) }

// byPriority orders ready jobs as Reserve serves them.
func byPriority(a, b *entry) bool {
	if a.pri != b.pri {
		return a.pri < b.pri
	}
	return a.seq < b.seq
}

// byAt orders delayed and reserved jobs as Tick handles them.
func byAt(a, b *entry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// byDue orders a topic's ready jobs by the time they became ready.
func byDue(a, b *entry) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

// Spilling records for the near future.
//
// The hot budget is first come, first served: a backlog of ready jobs
// nobody consumes can fill it, and then a burst of jobs due within the
// near-future window gets no records. The timer then reads each one back
// from Pebble when it comes due, and the reserve that hands it out reads
// it again: with 200,000 ready jobs waiting in another topic, 100,000 jobs
// due at one instant drained in 3.4 s instead of 2.0 s, a third of the
// server's CPU in Pebble point reads of freshly flushed tables.
//
// So a delayed job due soon may take the place of records held by ready
// jobs at the back of a long queue: the back of its heap's array, walked
// from the end. A heap's later positions go out after the positions above
// them, and jobs of one priority are pushed in seq order, so the array is
// close to its serving order and its end is the newest work. The walk
// does not stop at the leaves: in the full `bench.sh` run the jobs that
// held records were the oldest of each backlog, and the leaves (put once
// the budget was full) held none, so the burst still read a third of its
// records from Pebble. The front of each queue (spillKeepFront entries)
// keeps its records. A spilled entry keeps its place; only its record is
// read from Pebble when its turn comes, which is what every job beyond the
// budget costs anyway.

const (
	spillMinQueue  = 1024 // shorter queues keep their records: their back is not far from their front
	spillKeepFront = 512  // the first entries of a queue's array never give up their records
	spillScan      = 256  // entries one spill looks at, at most
	spillTopics    = 16   // topics one spill visits, at most
)

// spill drops the records of ready jobs at the back of long queues until
// need bytes of the hot budget are free, looking at no more than
// spillScan entries. It reports whether it freed enough. Requires mu.
func (s *Store) spill(need int) bool {
	looked, visited := 0, 0
	for _, tp := range s.topics { // map order: a different start each time
		if visited++; visited > spillTopics {
			break
		}
		es := tp.byPri.es
		n := len(es)
		if n < spillMinQueue {
			tp.spillAt = 0 // a queue that grows long again is walked from its new back
			continue
		}
		// spillAt counts from the back, so pushes and pops move it only a
		// little, and a queue whose back was all looked at is left alone.
		for ; tp.spillAt < n-spillKeepFront && looked < spillScan; tp.spillAt++ {
			looked++
			e := es[n-1-tp.spillAt]
			if e.job == nil {
				continue
			}
			s.hot -= e.size
			need -= e.size
			e.job, e.size = nil, 0
			if need <= 0 {
				return true
			}
		}
		if looked >= spillScan {
			break
		}
	}
	return false
}

// successor is the copy of a record that a transition changes into the
// job's next version. It shares the body: nothing in this package writes
// into a record's body, and every job that leaves the store is a Clone, so
// the body a client gets is its own. (A Clone per transition copied every
// body once more: a fifth of the bytes allocated while a burst drained.)
func successor(j *delayq.Job) *delayq.Job {
	n := *j
	return &n
}

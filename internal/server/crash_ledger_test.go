package server

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// ledger is the crash test's record of everything the clients saw the
// server acknowledge, and the checks run over it. Times named "server
// time" come from the server's answers; the others from the test's clock
// (the same machine's clock).
type ledger struct {
	mu         sync.Mutex
	puts       map[string]*putRec   // guarded by mu: every put sent, by id
	res        map[string][]resRec  // guarded by mu: every reservation received, by id
	finishes   map[string]finishRec // guarded by mu: every acknowledged finish, by id
	finTried   map[string]time.Time // guarded by mu: when a finish was first sent, by id
	kills      []time.Time          // guarded by mu: when each SIGKILL was sent
	violations []string             // guarded by mu
	stale      int                  // guarded by mu: reservations stamped before their due (see stampSlack)
	maxStale   time.Duration        // guarded by mu
}

// stampSlack is how far a reservation's server-side start (deadline - ttr)
// may lie before the due time or previous deadline that made its job
// ready. Stores act at the latest Now they have seen (the contract's "Now
// never goes back"), so none may: a consumer always gets its full TTR.
const stampSlack = 0

type putRec struct {
	topic string
	sent  time.Time     // before the request left: the server's due is at least sent+delay
	delay time.Duration // asked for
	acked bool          // a 201 came back
}

type resRec struct {
	token      string
	reservedAt time.Time // server time: deadline - ttr
	deadline   time.Time // server time
	due        time.Time // server time: the job's due when reserved
	recv       time.Time
	consumer   int
}

type finishRec struct {
	token string
	acked time.Time
}

func newLedger() *ledger {
	return &ledger{puts: map[string]*putRec{}, res: map[string][]resRec{},
		finishes: map[string]finishRec{}, finTried: map[string]time.Time{}}
}

func (l *ledger) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

func (l *ledger) putSent(id, topic string, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts[id] = &putRec{topic: topic, sent: time.Now(), delay: delay}
}

func (l *ledger) putAcked(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts[id].acked = true
}

// reserved records a delivery and checks, at once, the rules one delivery
// can break: an unknown job, a job delivered before it was due, a job that
// comes back after its finish was acknowledged.
func (l *ledger) reserved(id string, r resRec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.res[id] = append(l.res[id], r)
	p := l.puts[id]
	var bad []string
	if p == nil {
		l.violations = append(l.violations, fmt.Sprintf("job %s delivered but never put", id))
		return
	}
	// The server's due is at least sent+delay, less the millisecond the
	// stores truncate to.
	if due := p.sent.Add(p.delay - time.Millisecond); r.recv.Before(due) {
		bad = append(bad, fmt.Sprintf("job %s delivered early: received at %v, put sent at %v with delay %v",
			id, r.recv.Format(time.StampMilli), p.sent.Format(time.StampMilli), p.delay))
	} else if !l.stamp(r.due.Sub(r.reservedAt)) || !l.stamp(due.Sub(r.reservedAt)) {
		bad = append(bad, fmt.Sprintf("job %s reserved at %v (received %v), before its due time %v",
			id, r.reservedAt.Format(time.StampMilli), r.recv.Format(time.StampMilli), r.due.Format(time.StampMilli)))
	}
	if f, ok := l.finishes[id]; ok && r.reservedAt.After(f.acked) {
		bad = append(bad, fmt.Sprintf("job %s delivered again (%s) after its finish (%s) was acknowledged at %v",
			id, r.token, f.token, f.acked.Format(time.StampMilli)))
	}
	l.violations = append(l.violations, bad...)
}

// stamp accounts for a reservation stamped early by early (<= 0: not
// early) and reports whether that is within stampSlack. Requires mu.
func (l *ledger) stamp(early time.Duration) bool {
	if early <= 0 {
		return true
	}
	l.stale++
	l.maxStale = max(l.maxStale, early)
	return early <= stampSlack
}

func (l *ledger) finishSent(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.finTried[id]; !ok {
		l.finTried[id] = time.Now()
	}
}

func (l *ledger) finishAcked(id, token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finishes[id] = finishRec{token: token, acked: time.Now()}
}

func (l *ledger) killed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kills = append(l.kills, time.Now())
}

// untouched returns up to n acknowledged puts that no consumer has tried to
// finish: they must exist on the server whatever happened to it.
func (l *ledger) untouched(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, p := range l.puts {
		if _, tried := l.finTried[id]; p.acked && !tried && len(ids) < n {
			ids = append(ids, id)
		}
	}
	return ids
}

// finishTriedBefore reports whether a finish of id was sent before t.
func (l *ledger) finishTriedBefore(id string, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.finTried[id]
	return ok && at.Before(t)
}

// settled reports whether every acknowledged put was delivered and every
// delivered job saw a finish attempt, so the drain may stop once the
// server is empty too.
func (l *ledger) settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, p := range l.puts {
		if p.acked && len(l.res[id]) == 0 {
			return false
		}
	}
	return true
}

// checkHistory runs the checks that need a job's whole history.
func (l *ledger) checkHistory() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, p := range l.puts {
		rs := l.res[id]
		if p.acked && len(rs) == 0 {
			l.violations = append(l.violations, fmt.Sprintf("acknowledged put %s was never delivered", id))
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].reservedAt.Before(rs[j].reservedAt) })
		for i := 1; i < len(rs); i++ {
			prev, cur := rs[i-1], rs[i]
			early := prev.deadline.Sub(cur.reservedAt)
			if cur.token == prev.token || cur.recv.Before(prev.deadline) || !l.stamp(early) {
				l.violations = append(l.violations, fmt.Sprintf(
					"job %s handed to consumer %d (%s stamped %v, received %v) while consumer %d held it (%s until %v)",
					id, cur.consumer, cur.token, cur.reservedAt.Format(time.StampMilli), cur.recv.Format(time.StampMilli),
					prev.consumer, prev.token, prev.deadline.Format(time.StampMilli)))
			}
		}
		if f, ok := l.finishes[id]; ok && rs[len(rs)-1].token != f.token {
			l.violations = append(l.violations, fmt.Sprintf(
				"job %s finished as %s but later reserved as %s", id, f.token, rs[len(rs)-1].token))
		}
	}
}

// figures summarises the run for t.Logf.
type figures struct {
	kills, putsSent, putsAcked, putsUncertainLanded, reservations, redeliveries,
	redeliveredAcrossKill, finishesAcked, staleStamps int
	maxLateness, maxStale time.Duration
}

func (l *ledger) figures() figures {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := figures{kills: len(l.kills), putsSent: len(l.puts), finishesAcked: len(l.finishes),
		staleStamps: l.stale, maxStale: l.maxStale}
	for id, p := range l.puts {
		rs := l.res[id]
		if p.acked {
			f.putsAcked++
		} else if len(rs) > 0 {
			f.putsUncertainLanded++
		}
		f.reservations += len(rs)
		for i, r := range rs {
			if late := r.reservedAt.Sub(r.due); i == 0 && late > f.maxLateness {
				f.maxLateness = late
			}
			if i > 0 {
				f.redeliveries++
				if l.killBetween(rs[i-1].recv, r.recv) {
					f.redeliveredAcrossKill++
				}
			}
		}
	}
	return f
}

// killBetween reports whether a SIGKILL was sent between a and b; guarded
// by mu.
func (l *ledger) killBetween(a, b time.Time) bool {
	i := sort.Search(len(l.kills), func(i int) bool { return !l.kills[i].Before(a) })
	return i < len(l.kills) && l.kills[i].Before(b)
}

package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// randomOps is the length of each randomised op sequence.
const randomOps = 3000

// randomSeeds are run every time; DELAYQ_STORETEST_SEED adds one more (to
// replay a failure, or to explore).
var randomSeeds = []uint64{1, 2, 3}

// testRandom runs seeded random op sequences against the store under test
// and against memstore as the model, and compares every result and error.
// Seqs may differ between the two stores (only their order is the
// contract), so results are translated through the pairs Put assigned.
func testRandom(t *testing.T, f Factory) {
	seeds := randomSeeds
	if s := os.Getenv("DELAYQ_STORETEST_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DELAYQ_STORETEST_SEED=%q: %v", s, err)
		}
		seeds = append([]uint64{n}, seeds...)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			h := open(t, f)
			if _, ok := h.s.(*memstore.Store); ok {
				t.Skip("the store under test is the model")
			}
			m := memstore.New()
			t.Cleanup(func() { m.Close() })
			run := &randomRun{
				t: t, h: h, model: m, seed: seed,
				r:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
				now: base,
				fwd: map[uint64]uint64{}, back: map[uint64]uint64{},
			}
			run.run(randomOps)
		})
	}
}

// randomRun is one seeded op sequence.
type randomRun struct {
	t     *testing.T
	h     *harness
	model store.Store
	seed  uint64
	r     *rand.Rand
	now   time.Time
	step  int
	fwd   map[uint64]uint64 // seq in the store under test -> seq in the model
	back  map[uint64]uint64 // model seq -> seq in the store under test
	log   []string          // recent ops, printed on failure
}

// op is one step: it runs the same call on the store under test (sut) and
// the model, after translating model refs with rr.ref.
type op struct {
	name   string
	weight int
	do     func(rr *randomRun) (desc string, sut, model any, sutErr, modelErr error)
}

var ops = []op{
	{"Put", 10, (*randomRun).put},
	{"Reserve", 10, (*randomRun).reserve},
	{"Release", 5, (*randomRun).release},
	{"Touch", 3, (*randomRun).touch},
	{"Bury", 3, (*randomRun).bury},
	{"Finish", 5, (*randomRun).finish},
	{"Delete", 5, (*randomRun).delete},
	{"Kick", 2, (*randomRun).kick},
	{"KickJob", 2, (*randomRun).kickJob},
	{"Update", 3, (*randomRun).update},
	{"Tick", 10, (*randomRun).tick},
	{"Get", 4, (*randomRun).get},
	{"Topics", 2, (*randomRun).topics},
	{"List", 2, (*randomRun).list},
	{"Pause", 1, (*randomRun).pause},
	{"ReserveJob", 2, (*randomRun).reserveJob},
	{"GiveBack", 2, (*randomRun).giveBack},
}

func (rr *randomRun) run(n int) {
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for rr.step = 0; rr.step < n; rr.step++ {
		if rr.r.IntN(3) > 0 {
			rr.now = rr.now.Add(time.Duration(rr.r.IntN(800)) * time.Millisecond)
		}
		pick := rr.r.IntN(total)
		for _, o := range ops {
			if pick -= o.weight; pick < 0 {
				desc, sut, model, sutErr, modelErr := o.do(rr)
				rr.compare(o.name+desc, sut, model, sutErr, modelErr)
				break
			}
		}
	}
	_, sut, model, sutErr, modelErr := rr.topics()
	rr.compare("final Topics()", sut, model, sutErr, modelErr)
}

// compare fails the test when the two stores disagree.
func (rr *randomRun) compare(call string, sut, model any, sutErr, modelErr error) {
	rr.t.Helper()
	rr.log = append(rr.log, fmt.Sprintf("%d @%dms: %s -> %v", rr.step, rr.now.Sub(base).Milliseconds(), call, errClass(modelErr)))
	if len(rr.log) > 30 {
		rr.log = rr.log[1:]
	}
	ec, wc := errClass(sutErr), errClass(modelErr)
	var diff string
	if ec == wc && modelErr == nil {
		diff = cmp.Diff(model, rr.translate(sut), cmpOpts)
	}
	if ec != wc || diff != "" {
		rr.t.Fatalf("seed %d op %d: %s = %v (err %v), want %v (err %v)\ndiff (-model +store):\n%s\nrecent ops (model's error):\n%s\nreplay: DELAYQ_STORETEST_SEED=%d",
			rr.seed, rr.step, call, show(rr.translate(sut)), sutErr, show(model), modelErr, diff, strings.Join(rr.log, "\n"), rr.seed)
	}
}

// errClass names the sentinel err wraps.
func errClass(err error) string {
	if err == nil {
		return "nil"
	}
	for _, s := range []error{delayq.ErrNotFound, delayq.ErrExists, delayq.ErrNotReserved, delayq.ErrState, delayq.ErrInvalid, delayq.ErrUnavailable} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "unexpected error: " + err.Error()
}

// translate rewrites seqs and reservations of the store under test into
// the model's numbering.
func (rr *randomRun) translate(v any) any {
	switch v := v.(type) {
	case *delayq.Job:
		if v == nil {
			return v
		}
		j := v.Clone()
		seq, ok := rr.fwd[j.Seq]
		if !ok {
			seq = 1 << 62 // a seq the model never assigned: shows in the diff
		}
		if j.Reservation == delayq.ReservationToken(j.Seq, j.Attempts) {
			j.Reservation = delayq.ReservationToken(seq, j.Attempts)
		}
		j.Seq = seq
		return j
	case []*delayq.Job:
		out := make([]*delayq.Job, len(v))
		for i, j := range v {
			out[i] = rr.translate(j).(*delayq.Job)
		}
		return out
	}
	return v
}

// sutRef turns a ref in model numbering into the store under test's.
func (rr *randomRun) sutRef(ref delayq.Ref) delayq.Ref {
	if ref.Seq != 0 {
		ref.Seq = rr.sutSeq(ref.Seq)
	}
	if seq, attempts, ok := parseToken(ref.Reservation); ok {
		ref.Reservation = delayq.ReservationToken(rr.sutSeq(seq), attempts)
	}
	return ref
}

// sutSeq maps a model seq to the store under test's; a seq the model never
// assigned maps to one the other store cannot have assigned either.
func (rr *randomRun) sutSeq(seq uint64) uint64 {
	if s, ok := rr.back[seq]; ok {
		return s
	}
	return 1<<62 + seq
}

func parseToken(tok string) (seq uint64, attempts int, ok bool) {
	a, b, found := strings.Cut(tok, "-")
	if !found {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseUint(a, 10, 64)
	attempts, err2 := strconv.Atoi(b)
	return seq, attempts, err1 == nil && err2 == nil
}

// Random inputs. The id space is small so duplicates and misses happen.

var randomTopics = []string{"a", "b", "c"}

func (rr *randomRun) id() string             { return fmt.Sprintf("id%d", rr.r.IntN(32)) }
func (rr *randomRun) topic() string          { return randomTopics[rr.r.IntN(len(randomTopics))] }
func (rr *randomRun) ms(n int) time.Duration { return time.Duration(rr.r.IntN(n)) * time.Millisecond }

// exact is rr.now, half the time with a fraction of a millisecond added:
// a caller's exact instant, from which a TTR's deadline rounds up.
func (rr *randomRun) exact() time.Time {
	if rr.r.IntN(2) == 0 {
		return rr.now
	}
	return rr.now.Add(time.Duration(1 + rr.r.IntN(999_999)))
}

func (rr *randomRun) priority() uint32 {
	return []uint32{0, 1, 1023, 1024, 1024, 1024, 70000}[rr.r.IntN(7)]
}

func (rr *randomRun) body() []byte {
	b := make([]byte, rr.r.IntN(6))
	for i := range b {
		b[i] = byte(rr.r.IntN(256))
	}
	return b
}

// liveID returns the id of a random live job of the model in state (""
// for any), or a random id when there is none.
func (rr *randomRun) liveID(state delayq.State) string {
	var live []string
	for _, topic := range randomTopics {
		res, err := rr.model.List(rr.h.ctx, store.ListParams{Topic: topic, State: state})
		if err != nil {
			rr.t.Fatalf("model List(%s) = %v", topic, err)
		}
		for _, j := range res.Jobs {
			live = append(live, j.ID)
		}
	}
	if len(live) == 0 {
		return rr.id()
	}
	return live[rr.r.IntN(len(live))]
}

// freeID returns an id that is usually not live.
func (rr *randomRun) freeID() string {
	id := rr.id()
	for try := 0; try < 8 && rr.modelJob(id) != nil; try++ {
		id = rr.id()
	}
	return id
}

// allFree reports whether no job's id is live in the model or repeated.
func (rr *randomRun) allFree(jobs []*delayq.Job) bool {
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.ID] || rr.modelJob(j.ID) != nil {
			return false
		}
		seen[j.ID] = true
	}
	return true
}

// modelJob returns the model's job for a random id, or nil.
func (rr *randomRun) modelJob(id string) *delayq.Job {
	j, err := rr.model.Get(rr.h.ctx, delayq.Ref{ID: id})
	if err != nil {
		return nil
	}
	return j
}

// ref names a random id, sometimes by seq (including seqs of deleted or
// never-put jobs). With consumer set, it carries a reservation that is
// usually the current one, sometimes stale, empty or bogus.
func (rr *randomRun) ref(consumer bool) delayq.Ref {
	id := rr.id()
	if consumer && rr.r.IntN(4) > 0 {
		id = rr.liveID(delayq.StateReserved)
	} else if rr.r.IntN(2) == 0 {
		id = rr.liveID("")
	}
	ref := delayq.Ref{ID: id}
	j := rr.modelJob(id)
	if rr.r.IntN(4) == 0 {
		ref = delayq.Ref{Seq: uint64(rr.r.IntN(len(rr.back) + 3))}
		if j != nil && rr.r.IntN(2) == 0 {
			ref.Seq = j.Seq
		}
	}
	if !consumer {
		return ref
	}
	switch k := rr.r.IntN(10); {
	case j == nil:
		ref.Reservation = delayq.ReservationToken(uint64(rr.r.IntN(len(rr.back)+1)), 1)
	case k < 6 && j.Reservation != "":
		ref.Reservation = j.Reservation
	case k < 8:
		ref.Reservation = delayq.ReservationToken(j.Seq, max(j.Attempts-1, 0))
	case k < 9:
		ref.Reservation = "bogus"
	}
	return ref
}

func (rr *randomRun) put() (string, any, any, error, error) {
	var sutJobs, modelJobs []*delayq.Job
	var names []string
	for range 1 + rr.r.IntN(3) {
		due := rr.now
		if rr.r.IntN(2) == 0 {
			due = due.Add(rr.ms(5000))
		}
		j := newJob(rr.freeID(), rr.topic(), rr.now, due)
		j.Body, j.Priority, j.MaxAttempts = rr.body(), rr.priority(), rr.r.IntN(4)
		j.TTR = time.Second + rr.ms(3000)
		sutJobs, modelJobs = append(sutJobs, j), append(modelJobs, j.Clone())
		names = append(names, fmt.Sprintf("%s/%s due+%v", j.ID, j.Topic, due.Sub(rr.now)))
	}
	var sutErr error
	if fp, ok := rr.h.s.(store.FreshPutter); ok && rr.r.IntN(2) == 0 && rr.allFree(sutJobs) {
		// The engine's way for ids it generated: only ids that are not
		// live may go this way.
		names[0] = "fresh " + names[0]
		sutErr = fp.PutFresh(rr.h.ctx, sutJobs)
		if sutErr == nil {
			// PutFresh may give the jobs ids of the store's own making:
			// the model takes the same.
			for i, j := range sutJobs {
				modelJobs[i].ID = j.ID
			}
		}
	} else {
		sutErr = rr.h.s.Put(rr.h.ctx, sutJobs)
	}
	modelErr := rr.model.Put(rr.h.ctx, modelJobs)
	if sutErr == nil && modelErr == nil {
		for i := range sutJobs {
			rr.fwd[sutJobs[i].Seq], rr.back[modelJobs[i].Seq] = modelJobs[i].Seq, sutJobs[i].Seq
		}
	}
	return fmt.Sprintf("(%s)", strings.Join(names, ", ")), nil, nil, sutErr, modelErr
}

func (rr *randomRun) reserve() (string, any, any, error, error) {
	var topics []string
	for _, t := range randomTopics {
		if rr.r.IntN(2) == 0 {
			topics = append(topics, t)
		}
	}
	p := store.ReserveParams{Topics: topics, Max: 1 + rr.r.IntN(3), Now: rr.exact()}
	sut, sutErr := rr.h.s.Reserve(rr.h.ctx, p)
	model, modelErr := rr.model.Reserve(rr.h.ctx, p)
	return fmt.Sprintf("(%v, max %d)", topics, p.Max), sut, model, sutErr, modelErr
}

func (rr *randomRun) release() (string, any, any, error, error) {
	p := store.ReleaseParams{Ref: rr.ref(true), Due: rr.now.Add(rr.ms(3000) - 500*time.Millisecond), Now: rr.now}
	p.Delay = max(p.Due.Sub(rr.now), 0)
	if rr.r.IntN(2) == 0 {
		p.Priority = u32(rr.priority())
	}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.Release(rr.h.ctx, sp)
	model, modelErr := rr.model.Release(rr.h.ctx, p)
	return fmt.Sprintf("(%+v, due+%v)", p.Ref, p.Due.Sub(rr.now)), sut, model, sutErr, modelErr
}

func (rr *randomRun) touch() (string, any, any, error, error) {
	p := store.TouchParams{Ref: rr.ref(true), Now: rr.exact()}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.Touch(rr.h.ctx, sp)
	model, modelErr := rr.model.Touch(rr.h.ctx, p)
	return fmt.Sprintf("(%+v)", p.Ref), sut, model, sutErr, modelErr
}

func (rr *randomRun) bury() (string, any, any, error, error) {
	p := store.BuryParams{Ref: rr.ref(true), Now: rr.now}
	if rr.r.IntN(2) == 0 {
		p.Priority = u32(rr.priority())
	}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.Bury(rr.h.ctx, sp)
	model, modelErr := rr.model.Bury(rr.h.ctx, p)
	return fmt.Sprintf("(%+v)", p.Ref), sut, model, sutErr, modelErr
}

// finish is a consumer's delete: with a reservation.
func (rr *randomRun) finish() (string, any, any, error, error) {
	p := store.DeleteParams{Ref: rr.ref(true)}
	return rr.deleteWith(p)
}

// delete is an operator's or a producer's delete: no reservation.
func (rr *randomRun) delete() (string, any, any, error, error) {
	return rr.deleteWith(store.DeleteParams{Ref: rr.ref(false), Force: rr.r.IntN(2) == 0})
}

func (rr *randomRun) deleteWith(p store.DeleteParams) (string, any, any, error, error) {
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.Delete(rr.h.ctx, sp)
	model, modelErr := rr.model.Delete(rr.h.ctx, p)
	return fmt.Sprintf("(%+v, force %v)", p.Ref, p.Force), sut, model, sutErr, modelErr
}

func (rr *randomRun) kick() (string, any, any, error, error) {
	p := store.KickParams{Topic: rr.topic(), Max: 1 + rr.r.IntN(3), Now: rr.now}
	p.State = []delayq.State{"", delayq.StateBuried, delayq.StateDelayed}[rr.r.IntN(3)]
	sut, sutErr := rr.h.s.Kick(rr.h.ctx, p)
	model, modelErr := rr.model.Kick(rr.h.ctx, p)
	return fmt.Sprintf("(%s, %d)", p.Topic, p.Max), sut, model, sutErr, modelErr
}

func (rr *randomRun) kickJob() (string, any, any, error, error) {
	p := store.KickJobParams{Ref: rr.ref(false), Now: rr.now}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.KickJob(rr.h.ctx, sp)
	model, modelErr := rr.model.KickJob(rr.h.ctx, p)
	return fmt.Sprintf("(%+v)", p.Ref), sut, model, sutErr, modelErr
}

func (rr *randomRun) update() (string, any, any, error, error) {
	p := store.UpdateParams{Ref: rr.ref(false), Now: rr.now}
	if rr.r.IntN(2) == 0 {
		due := rr.now.Add(rr.ms(5000) - 500*time.Millisecond)
		p.Due, p.Delay = &due, max(due.Sub(rr.now), 0)
	}
	if rr.r.IntN(3) == 0 {
		p.Body = rr.body()
	}
	if rr.r.IntN(3) == 0 {
		p.Priority = u32(rr.priority())
	}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.Update(rr.h.ctx, sp)
	model, modelErr := rr.model.Update(rr.h.ctx, p)
	return fmt.Sprintf("(%+v, due %v)", p.Ref, p.Due != nil), sut, model, sutErr, modelErr
}

func (rr *randomRun) tick() (string, any, any, error, error) {
	// Max stays above the number of live jobs: which jobs a smaller Max
	// picks among due reserved and delayed ones is not part of the contract.
	p := store.TickParams{Now: rr.now, Max: 1000}
	sut, sutErr := rr.h.s.Tick(rr.h.ctx, p)
	model, modelErr := rr.model.Tick(rr.h.ctx, p)
	return "()", sut, model, sutErr, modelErr
}

func (rr *randomRun) get() (string, any, any, error, error) {
	ref := rr.ref(false)
	sut, sutErr := rr.h.s.Get(rr.h.ctx, rr.sutRef(ref))
	model, modelErr := rr.model.Get(rr.h.ctx, ref)
	return fmt.Sprintf("(%+v)", ref), sut, model, sutErr, modelErr
}

func (rr *randomRun) topics() (string, any, any, error, error) {
	sut, sutErr := rr.h.s.Topics(rr.h.ctx)
	model, modelErr := rr.model.Topics(rr.h.ctx)
	return "()", sut, model, sutErr, modelErr
}

// list pages through a topic in both stores and compares the whole
// listing (cursors are opaque, so pages are not compared one by one).
func (rr *randomRun) list() (string, any, any, error, error) {
	states := []delayq.State{"", delayq.StateReady, delayq.StateDelayed, delayq.StateReserved, delayq.StateBuried}
	p := store.ListParams{Topic: rr.topic(), State: states[rr.r.IntN(len(states))], Limit: 1 + rr.r.IntN(4)}
	sut, sutErr := listAll(rr.h, rr.h.s, p)
	model, modelErr := listAll(rr.h, rr.model, p)
	return fmt.Sprintf("(%s, %q, limit %d)", p.Topic, p.State, p.Limit), sut, model, sutErr, modelErr
}

func listAll(h *harness, s store.Store, p store.ListParams) ([]*delayq.Job, error) {
	var all []*delayq.Job
	for range 1000 {
		res, err := s.List(h.ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, res.Jobs...)
		if res.Next == "" {
			return all, nil
		}
		p.Cursor = res.Next
	}
	return nil, errors.New("list: cursor never ends")
}

func (rr *randomRun) pause() (string, any, any, error, error) {
	p := store.PauseParams{Topic: rr.topic()}
	if rr.r.IntN(3) > 0 {
		p.Until = rr.now.Add(rr.ms(4000))
	}
	sutErr := rr.h.s.Pause(rr.h.ctx, p)
	modelErr := rr.model.Pause(rr.h.ctx, p)
	return fmt.Sprintf("(%s, until+%v)", p.Topic, p.Until.Sub(rr.now)), nil, nil, sutErr, modelErr
}

// reserveJob runs Store.ReserveJob.
func (rr *randomRun) reserveJob() (string, any, any, error, error) {
	p := store.ReserveJobParams{Ref: rr.ref(false), Now: rr.exact()}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.ReserveJob(rr.h.ctx, sp)
	model, modelErr := rr.model.ReserveJob(rr.h.ctx, p)
	return fmt.Sprintf("(%+v)", p.Ref), sut, model, sutErr, modelErr
}

// giveBack undoes a reservation as the engine does for a consumer that
// went away before it got the job.
func (rr *randomRun) giveBack() (string, any, any, error, error) {
	p := store.GiveBackParams{Ref: rr.ref(true)}
	sp := p
	sp.Ref = rr.sutRef(p.Ref)
	sut, sutErr := rr.h.s.GiveBack(rr.h.ctx, sp)
	model, modelErr := rr.model.GiveBack(rr.h.ctx, p)
	return fmt.Sprintf("(%+v)", p.Ref), sut, model, sutErr, modelErr
}

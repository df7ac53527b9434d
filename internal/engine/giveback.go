package engine

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// GiveBack undoes reservations their consumer never received, for a
// front end whose client went away before the reserve's answer reached
// it (a beanstalkd connection that closed before its RESERVED reply was
// written). Each job goes back to ready with the attempt its reserve
// counted taken back (store.Store.GiveBack): a give-back costs no attempt,
// unlike a Release, and so never buries a job whose attempts would be
// spent. A job whose reservation has moved on (its TTR ran out) is left
// as it is. It uses a context of its own: the caller's is usually done.
// Each give-back counts as operation "give_back" in the metrics.
func (e *Engine) GiveBack(refs ...delayq.Ref) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ref := range refs {
		got, err := e.st.GiveBack(ctx, store.GiveBackParams{Ref: ref})
		if e.record("give_back", err) != nil {
			e.log.Warn("could not give back a job reserved for a caller that left; it returns at its TTR", "job", ref.String(), "err", err)
			continue
		}
		e.announce(got)
	}
}

// giveBack gives back jobs the engine reserved for a caller that has gone.
func (e *Engine) giveBack(jobs ...*delayq.Job) {
	refs := make([]delayq.Ref, len(jobs))
	for i, j := range jobs {
		refs[i] = delayq.Ref{ID: j.ID, Seq: j.Seq, Reservation: j.Reservation}
	}
	e.GiveBack(refs...)
}

// GiveBack opens the signed reservation like every call by job
// (reservation.go), so the store sees its own token.
func (s *sealed) GiveBack(ctx context.Context, p store.GiveBackParams) (*delayq.Job, error) {
	var err error
	if p.Ref, err = s.ref(ctx, p.Ref); err != nil {
		return nil, err
	}
	j, err := s.Store.GiveBack(ctx, p)
	return s.sealJob(j), err
}

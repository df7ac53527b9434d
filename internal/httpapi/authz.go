package httpapi

import (
	"context"
	"net/http"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/auth"
)

type principalKey struct{}

// withPrincipal records the caller the guard authenticated, for the
// handlers that answer differently by scope.
func withPrincipal(ctx context.Context, p *auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// hideReservations blanks the reservation of every job in jobs whose
// topic the caller may not consume from: a reservation lets its holder
// finish, release, touch or bury the job, which a token that may only
// read the topic must not be able to do by reading it. Without a guard
// (no principal recorded), or for a principal allowed everywhere, jobs
// are answered as they are.
func hideReservations(r *http.Request, jobs ...*delayq.Job) {
	p, _ := r.Context().Value(principalKey{}).(*auth.Principal)
	if p == nil || p.AllowsAll(auth.Consume) {
		return
	}
	for _, j := range jobs {
		if j != nil && j.Reservation != "" && !p.Allows(auth.Consume, j.Topic) {
			j.Reservation = ""
		}
	}
}

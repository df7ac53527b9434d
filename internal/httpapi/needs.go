package httpapi

import (
	"sync"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
)

// onNames are auth.On's names on the wire (api.RouteNeed.On).
var onNames = map[auth.On]string{
	auth.OnAnyone: "anyone",
	auth.OnCaller: "caller",
	auth.OnTopics: "topics",
	auth.OnJobs:   "jobs",
	auth.OnEvery:  "every",
}

// routeNeeds is what each route of guardRules asks of its caller, in
// auth's words: GET /v1/session answers it, so the dashboard disables the
// actions a token may not take from the same table the guard enforces.
// Built once: both tables are fixed at build time.
var routeNeeds = sync.OnceValue(func() map[string]api.RouteNeed {
	out := make(map[string]api.RouteNeed, len(guardRules))
	for _, gr := range guardRules {
		n, ok := auth.NeedOf(gr.op)
		if !ok {
			continue // refused to everyone; TestGuardCoversEveryRoute keeps this from happening
		}
		rn := api.RouteNeed{Scopes: make([]string, 0, len(n.Scopes)), On: onNames[n.On]}
		for _, s := range n.Scopes {
			rn.Scopes = append(rn.Scopes, string(s))
		}
		out[gr.pattern] = rn
	}
	return out
})

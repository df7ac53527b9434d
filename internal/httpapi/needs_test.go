package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
)

// TestSessionNeeds: GET /v1/session answers, for every route the guard
// checks, what auth's table says it needs, so the dashboard disables
// what a token may not do from the table the guard enforces.
func TestSessionNeeds(t *testing.T) {
	s := newSessionServer(t)
	resp, body := s.send("GET", "/v1/session", "", "Authorization", "Bearer viewer-token")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/session = %d %s", resp.StatusCode, body)
	}
	var got api.Session
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Needs) != len(guardRules) {
		t.Errorf("the session names the needs of %d routes, the guard checks %d", len(got.Needs), len(guardRules))
	}
	for _, gr := range guardRules {
		n, _ := auth.NeedOf(gr.op)
		want := api.RouteNeed{Scopes: []string{}, On: onNames[n.On]}
		for _, sc := range n.Scopes {
			want.Scopes = append(want.Scopes, string(sc))
		}
		if diff := cmp.Diff(want, got.Needs[gr.pattern]); diff != "" {
			t.Errorf("needs of %s (-want +got):\n%s", gr.pattern, diff)
		}
	}
	if k := got.Needs["POST /v1/topics/{topic}/kick"]; !cmp.Equal(k, api.RouteNeed{Scopes: []string{"admin"}, On: "topics"}) {
		t.Errorf("a topic kick needs %+v, want admin on its topic", k)
	}
	if got.Name != "viewer" || !cmp.Equal(got.Scopes, []string{"read"}) {
		t.Errorf("session = %s %v, want viewer [read]", got.Name, got.Scopes)
	}
}

package dashboard_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/dashboard"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/store/memstore"
)

// TestBrowserAsksForToken: against a server with tokens, the dashboard
// gets 401, asks for a token in a prompt, and shows the topics with it.
func TestBrowserAsksForToken(t *testing.T) {
	chromium := findChromium(t)
	st := memstore.New()
	log := slog.New(slog.DiscardHandler)
	e := engine.New(st, engine.Config{Logger: log})
	ectx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ectx) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	tokens, err := auth.Load("", `{"tokens":[{"name":"ops","sha256":"`+auth.HashToken("ops-token")+`","scopes":["read"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.NewHandler(e, httpapi.Options{UI: dashboard.Handler(), Logger: log})
	srv := httptest.NewServer(httpapi.Guard(e, api, httpapi.GuardOptions{Auth: tokens, Logger: log}))
	t.Cleanup(srv.Close)
	if _, err := e.Put(t.Context(), []engine.PutRequest{{Topic: "mail", Body: []byte("x"), TTR: time.Minute}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancelCtx := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancelCtx()
	ctx = newBrowser(t, ctx, chromium)
	prompts := make(chan string, 4)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			select {
			case prompts <- ev.Message:
			default:
			}
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true, PromptText: "ops-token"})
			}()
		}
	}()
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#topics tbody a.topic-link")))
	select {
	case <-prompts:
	default:
		t.Fatal("the topics showed without asking for a token")
	}
	if got := text(t, ctx, "#topics tbody a.topic-link"); got != "mail" {
		t.Fatalf("topic shown: %q", got)
	}
}

package grpcapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/limits"
)

// TestEveryTopicMethodIsListed walks every method of DelayQService as
// its descriptor declares it: each has an operation, and each whose
// operation is allowed by topic has an entry in topicsOf that finds the
// topic a request names, so the scope check cannot fail open for a
// method added later.
func TestEveryTopicMethodIsListed(t *testing.T) {
	sd := delayqv1.File_delayq_v1_delayq_proto.Services().ByName("DelayQService")
	methods := sd.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		procedure := "/" + string(sd.FullName()) + "/" + string(m.Name())
		op, ok := ops[procedure]
		if !ok {
			t.Errorf("%s has no operation in ops", procedure)
			continue
		}
		need, ok := auth.NeedOf(op)
		if !ok || need.On != auth.OnTopics {
			continue
		}
		of, ok := topicsOf[m.Input().FullName()]
		if !ok {
			t.Errorf("%s is allowed by topic, but topicsOf does not say how to find the topics of %s", procedure, m.Input().FullName())
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		if err != nil {
			t.Fatal(err)
		}
		msg := mt.New()
		fields := msg.Descriptor().Fields()
		switch f := fields.ByName("topic"); {
		case f != nil:
			msg.Set(f, protoreflect.ValueOfString("secret"))
		case fields.ByName("topics") != nil:
			msg.Mutable(fields.ByName("topics")).List().Append(protoreflect.ValueOfString("secret"))
		default:
			t.Errorf("%s names no topic field; its entry cannot find one", m.Input().FullName())
			continue
		}
		if got := of(msg.Interface()); len(got) != 1 || got[0] != "secret" {
			t.Errorf("topicsOf[%s] = %v, want [secret]", m.Input().FullName(), got)
		}
	}
}

// A request message the table does not list, for an operation allowed by
// topic, is refused to a token limited to topics and let through to one
// that may do the operation everywhere: the check fails closed.
func TestUnlistedMessageFailsClosed(t *testing.T) {
	tokens, err := auth.Load("", `{"tokens":[
	  {"name":"scoped","sha256":"`+auth.HashToken("scoped")+`","scopes":["produce"],"topics":["a*"]},
	  {"name":"all","sha256":"`+auth.HashToken("all")+`","scopes":["produce"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	unlisted := &delayqv1.GetRequest{Id: "x"} // no topic field, not in topicsOf
	if _, err := allow(context.Background(), tokens.ByToken("scoped"), auth.OpPut, unlisted); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a topic-scoped token with an unlisted message = %v, want forbidden", err)
	}
	if _, err := allow(context.Background(), tokens.ByToken("all"), auth.OpPut, unlisted); err != nil {
		t.Errorf("an unscoped token with an unlisted message = %v, want allowed", err)
	}
	if _, err := allow(context.Background(), tokens.ByToken("scoped"), auth.OpPut, &delayqv1.PutRequest{Topic: "b"}); err == nil {
		t.Error("a listed message naming a topic outside the token's = allowed")
	}
	if _, err := allow(context.Background(), tokens.ByToken("scoped"), auth.OpPut, &delayqv1.PutRequest{Topic: "a1"}); err != nil {
		t.Errorf("a listed message naming the token's topic = %v", err)
	}
}

// A rate-limited call says how long to wait, as gRPC clients read it: a
// RetryInfo detail and a retry-after trailer.
func TestRateLimitRetryAfterOverGRPC(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{Rates: limits.NewRates(0.5, 1)})
	_ = a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "x"}, &delayqv1.GetResponse{})
	var trailer metadata.MD
	err := a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "x"}, &delayqv1.GetResponse{}, grpc.Trailer(&trailer))
	st, info := errInfo(t, err)
	if st.Code() != codes.ResourceExhausted || info.Code != delayq.CodeRateLimited {
		t.Fatalf("second call = %v %v, want resource exhausted rate_limited", st.Code(), info)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 || retry.GetRetryDelay().AsDuration() > 2e9 {
		t.Errorf("RetryInfo = %v, want a delay in (0, 2s]", retry)
	}
	if v := trailer.Get("retry-after"); len(v) != 1 || v[0] != "2" {
		t.Errorf("retry-after trailer = %v, want [2] (seconds, rounded up)", v)
	}
}

// connectPost sends one Connect unary call over real HTTP with the given
// Content-Type and returns the status and the decoded answer.
func connectPost(t *testing.T, a *testAPI, method, contentType, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", a.srv.URL+"/delayq.v1.DelayQService/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer %d %q is not JSON", resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// Connect JSON is strict whichever way the client names it: a misspelt
// field is refused, with charset=utf-8 as without, and nothing is put.
func TestConnectJSONStrictWithCharset(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8"} {
		code, out := connectPost(t, a, "Put", ct, `{"topic":"t","id":"typo","ttr":"5s","priorty":1}`)
		if code != http.StatusBadRequest || out["code"] != "invalid_argument" || !strings.Contains(out["message"].(string), "priorty") {
			t.Errorf("Content-Type %q with a misspelt field: %d %v, want 400 invalid_argument naming it", ct, code, out)
		}
	}
	if _, err := a.e.Get(context.Background(), delayq.Ref{ID: "typo"}); err == nil {
		t.Error("a put with an unknown field was stored")
	}
}

// A Connect JSON put of a body at the limit fits: the limit counts the
// body's bytes, not its base64 text; one byte more is body_too_big.
func TestConnectJSONPutAtMaxBody(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	max := a.e.Config().MaxBody
	for _, n := range []int{52 << 10, max} {
		body := base64.StdEncoding.EncodeToString(make([]byte, n))
		code, out := connectPost(t, a, "Put", "application/json", `{"topic":"t","id":"big`+strconv.Itoa(n)+`","body":"`+body+`"}`)
		if code != http.StatusOK {
			t.Errorf("Connect JSON put of %d bytes: %d %v, want 200", n, code, out)
		}
	}
	body := base64.StdEncoding.EncodeToString(make([]byte, max+1))
	if code, out := connectPost(t, a, "Put", "application/json", `{"topic":"t","id":"over","body":"`+body+`"}`); code == http.StatusOK {
		t.Errorf("a put of max+1 bytes = %d %v, want refused", code, out)
	}
}

// A compressed request's refusal says what to do, not "supported
// encodings are " with nothing after it.
func TestCompressedRefusalSaysWhy(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	code, out := connectPost(t, a, "Get", "application/json", `{"id":"x"}`, "Content-Encoding", "gzip")
	msg, _ := out["message"].(string)
	if code == http.StatusOK || out["code"] != "unimplemented" || !strings.Contains(msg, "uncompressed") || strings.HasSuffix(strings.TrimSpace(msg), "are") {
		t.Errorf("gzip request: %d %v, want unimplemented saying to send it uncompressed", code, out)
	}
	err := a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "x"}, &delayqv1.GetResponse{}, grpc.UseCompressor("gzip"))
	if st := status.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "uncompressed") {
		t.Errorf("gRPC gzip call = %v, want unimplemented saying to send it uncompressed", err)
	}
}

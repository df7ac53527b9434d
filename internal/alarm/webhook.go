package alarm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Limits of an alarm's webhook settings.
const (
	MaxSecretLen      = 256
	MaxHeaders        = 20
	MaxHeaderNameLen  = 128
	MaxHeaderValueLen = 1024
	MaxHeaderBytes    = 8 << 10 // names and values together
)

// reservedHeaders cannot be set by an alarm: the hop-by-hop headers (they
// belong to one connection, not to the event), those net/http computes
// from the request (Host, Content-Length), the payload's Content-Type, and
// delayq's own signature headers, which a receiver must be able to trust.
var reservedHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Content-Type": true,
}

// checkWebhook validates r's secret, headers and format into a.
func checkWebhook(a *Alarm, r *api.AlarmRequest) error {
	switch r.Format {
	case "", api.AlarmFormatDelayq, api.AlarmFormatAlertmanager, api.AlarmFormatSlack:
		if r.Format != api.AlarmFormatDelayq {
			a.Format = r.Format
		}
	default:
		return delayq.Invalid(delayq.CodeBadAlarmFormat, "format", "%q is not delayq, alertmanager or slack", clip(r.Format))
	}
	if len(r.Secret) > MaxSecretLen {
		return delayq.Invalid(delayq.CodeBadAlarmSecret, "secret", "%d bytes, at most %d", len(r.Secret), MaxSecretLen)
	}
	a.Secret = r.Secret
	if len(r.Headers) > MaxHeaders {
		return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "%d headers, at most %d", len(r.Headers), MaxHeaders)
	}
	total := 0
	for _, name := range sortedKeys(r.Headers) { // the first problem by name, the same every time
		value := r.Headers[name]
		if err := checkHeader(name, value); err != nil {
			return err
		}
		total += len(name) + len(value)
		if a.Headers == nil {
			a.Headers = make(map[string]string, len(r.Headers))
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if _, dup := a.Headers[canon]; dup {
			return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "%q is given twice (header names are case-insensitive)", clip(name))
		}
		a.Headers[canon] = value
	}
	if total > MaxHeaderBytes {
		return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "%d bytes of names and values, at most %d", total, MaxHeaderBytes)
	}
	return nil
}

// checkHeader refuses a header name that is not an HTTP token or is
// reserved, and a value a request could not carry as it is.
func checkHeader(name, value string) error {
	if name == "" || len(name) > MaxHeaderNameLen {
		return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "a header name must be 1-%d bytes", MaxHeaderNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", clip(name))
		}
	}
	canon := textproto.CanonicalMIMEHeaderKey(name)
	if reservedHeaders[canon] || strings.HasPrefix(canon, "X-Delayq-") {
		return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "%s cannot be set: it is hop-by-hop, set by the server, or delayq's own", canon)
	}
	if len(value) > MaxHeaderValueLen {
		return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "the value of %s is %d bytes, at most %d", canon, len(value), MaxHeaderValueLen)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "the value of %s holds a control character", canon)
		}
	}
	if value != strings.TrimSpace(value) {
		return delayq.Invalid(delayq.CodeBadAlarmHeader, "headers", "the value of %s starts or ends with white space, which HTTP drops", canon)
	}
	return nil
}

// isTokenChar reports whether c may be in an HTTP token (RFC 9110 5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// format is the alarm's payload format, with the default filled in.
func (a *Alarm) format() string {
	if a.Format == "" {
		return api.AlarmFormatDelayq
	}
	return a.Format
}

// Sign is the value of the X-Delayq-Signature header of an event: the
// HMAC-SHA256, keyed by the alarm's secret, of the timestamp (Unix
// seconds, as sent in X-Delayq-Timestamp), a dot, and the body exactly as
// sent, written "sha256=" and lowercase hex. Signing the timestamp lets a
// receiver refuse a replayed event (an old timestamp) that it cannot tell
// from a new one by its body.
func Sign(secret string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// setHeaders sets the alarm's custom headers and, with a secret, the
// timestamp and signature of body at now (each attempt is signed anew, so
// a retry minutes later still passes a receiver's freshness check).
func setHeaders(h http.Header, d *delivery, body []byte, now time.Time) {
	for k, v := range d.headers {
		h.Set(k, v)
	}
	if d.secret != "" {
		ts := now.Unix()
		h.Set(api.TimestampHeader, strconv.FormatInt(ts, 10))
		h.Set(api.SignatureHeader, Sign(d.secret, ts, body))
	}
}

// render is ev as the body of the alarm's format.
func render(format string, ev api.AlarmEvent) ([]byte, error) {
	switch format {
	case api.AlarmFormatAlertmanager:
		return json.Marshal(alertmanagerPayload(ev))
	case api.AlarmFormatSlack:
		return json.Marshal(struct {
			Text string `json:"text"`
		}{slackText(ev)})
	default:
		return json.Marshal(ev)
	}
}

// amAlert and amPayload are Alertmanager's webhook payload (version 4),
// as its webhook_config receivers get it, so a receiver written for
// Alertmanager (or Alertmanager-compatible tooling) takes delayq's events
// unchanged.
type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

type amPayload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []amAlert         `json:"alerts"`
}

// alertmanagerPayload is one event as an Alertmanager notification of
// one alert: labels alertname (the alarm), topic and condition; endsAt
// is the resolution time, zero while firing (as Alertmanager sends it).
func alertmanagerPayload(ev api.AlarmEvent) amPayload {
	labels := map[string]string{"alertname": ev.Alarm, "topic": ev.Topic, "condition": ev.Condition, "source": "delayq"}
	ann := map[string]string{
		"summary":   summary(ev),
		"value":     strconv.FormatFloat(ev.Value, 'g', -1, 64),
		"threshold": strconv.FormatFloat(ev.Threshold, 'g', -1, 64),
	}
	a := amAlert{Status: ev.State, Labels: labels, Annotations: ann, StartsAt: ev.Since.Time.UTC(),
		Fingerprint: fingerprint(labels)}
	if ev.State == StateResolved {
		a.EndsAt = ev.At.Time.UTC()
	}
	return amPayload{
		Version: "4", GroupKey: fmt.Sprintf("{}:{alertname=%q}", ev.Alarm), Status: ev.State, Receiver: ev.Alarm,
		GroupLabels: map[string]string{"alertname": ev.Alarm}, CommonLabels: labels, CommonAnnotations: ann,
		Alerts: []amAlert{a},
	}
}

// fingerprint identifies an alert by its labels, as Alertmanager's does
// (16 hex digits); a receiver matches a resolution to its firing by it.
func fingerprint(labels map[string]string) string {
	h := sha256.New()
	for _, k := range sortedKeys(labels) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(labels[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// summary says an event in one line.
func summary(ev api.AlarmEvent) string {
	if ev.State == StateResolved {
		return fmt.Sprintf("topic %s: %s resolved (now %s, threshold %s)", ev.Topic, ev.Condition, num(ev.Value), num(ev.Threshold))
	}
	return fmt.Sprintf("topic %s: %s is %s, over %s, since %s", ev.Topic, ev.Condition, num(ev.Value), num(ev.Threshold),
		ev.Since.Time.UTC().Format(time.RFC3339))
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// slackText is an event as a Slack message.
func slackText(ev api.AlarmEvent) string {
	return fmt.Sprintf("[%s] delayq alarm %s: %s", strings.ToUpper(ev.State), ev.Alarm, summary(ev))
}

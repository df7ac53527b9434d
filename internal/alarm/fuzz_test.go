package alarm

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// FuzzParse: any body either parses into an alarm whose wire form parses
// back to the same alarm, or is refused with a named validation error;
// it never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"url":"http://h/hook","topics":["jobs.*"],"when":{"buried_over":3,"oldest_ready_over":"5m","lateness_p99_over":"1s","failures_per_min_over":10},"repeat":"10m"}`,
		`{"url":"https://h","when":{"buried_over":0}}`,
		`{"url":"ftp://h","when":{}}`,
		`{"url":"http://h","when":{"oldest_ready_over":-1},"repeat":"-1s"}`,
		`{"url":"http://h","topics":["[a"],"when":{"buried_over":1}}`,
		`{"url":"http://h","when":{"buried_over":1},"secret":"s","headers":{"x-a":"b","Authorization":"Bearer t"},"format":"alertmanager"}`,
		`{"url":"http://h","when":{"buried_over":1},"headers":{"Host":"x","a b":"c"},"format":"pager"}`,
		`[]`, `null`, `{"url":1}`,
	} {
		f.Add("alarm", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		a, err := Parse(name, body)
		if err != nil {
			var ve *delayq.ValidationError
			if !errors.As(err, &ve) || delayq.CodeOf(err) == "" {
				t.Fatalf("Parse refused with an unnamed error: %v", err)
			}
			return
		}
		b, err := json.Marshal(a.Request())
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(name, b)
		if err != nil {
			t.Fatalf("the wire form %s of a parsed alarm does not parse: %v", b, err)
		}
		// The secret is write-only: the wire form carries the mask.
		if a.Secret != "" {
			if again.Secret != api.SecretMask {
				t.Fatalf("the wire form shows the secret: %s", b)
			}
			again.Secret = a.Secret
		}
		if !reflect.DeepEqual(a, again) {
			t.Fatalf("round trip changed the alarm:\n%+v\n%+v", a, again)
		}
	})
}

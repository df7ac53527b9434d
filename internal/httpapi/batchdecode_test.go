package httpapi

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// FuzzBatchDecode: the streaming batch decoder accepts exactly what
// decoding the whole body accepts (up to delayq.MaxBatch jobs), with the
// same jobs.
func FuzzBatchDecode(f *testing.F) {
	for _, s := range []string{
		`{"jobs":[{"body":"a"},{"body":"b","delay":"1s","id":"x"}]}`,
		`{"jobs":null}`,
		`{"jobs":[]}`,
		`{"Jobs":[{"body":"a"}],"jobs":[{"body":"b"}]}`,
		`{"jobs":[{"body":"a","nope":1}]}`,
		`{"jobs":[{"body":"a"}]} {}`,
		`{"jobs":"x"}`,
		`[]`,
		``,
		`{"jobs":[{"body_base64":"AAE="}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var whole, stream api.BatchRequest
		errWhole := decodeBytes(b, &whole)
		errStream := decodeBatchFrom(bytes.NewReader(b), &stream)
		if errWhole == nil && len(whole.Jobs) > delayq.MaxBatch {
			return
		}
		if (errWhole == nil) != (errStream == nil) {
			t.Fatalf("whole: %v; stream: %v", errWhole, errStream)
		}
		if errWhole != nil {
			return
		}
		if len(whole.Jobs) == 0 && len(stream.Jobs) == 0 {
			return
		}
		if d := cmp.Diff(whole.Jobs, stream.Jobs); d != "" {
			t.Fatalf("jobs differ (-whole +stream):\n%s", d)
		}
	})
}

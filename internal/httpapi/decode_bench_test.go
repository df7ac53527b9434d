package httpapi

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
)

// putBody is a typical put: an id, a delay, a ttr and a 1 KiB body.
var putBody = []byte(`{"id":"order-1234567","body":"` + strings.Repeat("x", 1024) + `","delay":"30m","ttr":"60s","priority":10,"max_attempts":5}`)

// BenchmarkDecodePut measures the put path's decode of one request body.
func BenchmarkDecodePut(b *testing.B) {
	b.SetBytes(int64(len(putBody)))
	b.ReportAllocs()
	for b.Loop() {
		var req api.PutRequest
		if err := decodeBytes(putBody, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBatch100 measures the batch decoder on 100 such jobs.
func BenchmarkDecodeBatch100(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	for i := range 100 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"id":"order-%d","body":"%s","delay":"30m","ttr":"60s","priority":10}`, i, strings.Repeat("x", 1024))
	}
	buf.WriteString(`]}`)
	body := buf.Bytes()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req api.BatchRequest
		if err := decodeBatchFrom(bytes.NewReader(body), &req); err != nil {
			b.Fatal(err)
		}
	}
}

package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
)

// BenchmarkPutReserveFinish is one job's whole life through the v1 API
// (handler called directly, no sockets) over the durable diskstore.
func BenchmarkPutReserveFinish(b *testing.B) {
	for _, size := range []int{8, 1024, 8192} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			a := newAPI(b, Options{})
			put := `{"body":"` + strings.Repeat("x", size) + `"}`
			b.ReportAllocs()
			for b.Loop() {
				if w := serve(a.h, "POST", "/v1/topics/t/jobs", put); w.Code != http.StatusCreated {
					b.Fatalf("put = %d %s", w.Code, w.Body)
				}
				w := serve(a.h, "POST", "/v1/reserve", `{"topics":["t"]}`)
				var r api.JobsResponse
				if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || len(r.Jobs) != 1 {
					b.Fatalf("reserve = %d %s", w.Code, w.Body)
				}
				finish := `{"reservation":"` + r.Jobs[0].Reservation + `"}`
				if w := serve(a.h, "POST", "/v1/jobs/"+r.Jobs[0].ID+"/finish", finish); w.Code != http.StatusOK {
					b.Fatalf("finish = %d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkPutParallel measures concurrent puts, where the diskstore's
// group commit shares fsyncs between requests.
func BenchmarkPutParallel(b *testing.B) {
	a := newAPI(b, Options{})
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if w := serve(a.h, "POST", "/v1/topics/t/jobs", `{"body":"hello","delay":"1h"}`); w.Code != http.StatusCreated {
				b.Errorf("put = %d %s", w.Code, w.Body)
				return
			}
		}
	})
}

// BenchmarkPutBatch100 measures batch puts of 100 delayed jobs, reported
// per job: JSON decoding, validation and one durable write per batch.
func BenchmarkPutBatch100(b *testing.B) {
	a := newAPI(b, Options{})
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"body":"` + strings.Repeat("x", 100) + `","delay":"1h"}`)
	}
	sb.WriteString(`]}`)
	req := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(a.h, "POST", "/v1/topics/t/jobs/batch", req); w.Code != http.StatusCreated {
			b.Fatalf("batch = %d %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

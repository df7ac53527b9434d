// Command bench-topics measures what topics that come and go cost a
// running delayq server (issue 28): it puts -n jobs over HTTP, each in a
// topic of its own (or spread over -topics topics, the baseline), 1,000
// at a time, reserves each thousand in one call and finishes them in one
// batch, so at most 1,000 topics are live at once. It prints the
// server's VmRSS and VmHWM (-pid) before, every 20,000 jobs, when done
// and after -wait idle (long enough for the server to forget the gone
// topics: a minute plus two --alarm-interval, swept every 10 s).
//
//	delayq serve --data-dir /tmp/d --fsync 100ms --beanstalk-addr '' &
//	go run ./scripts/bench-topics -url http://127.0.0.1:7480 -pid $! -n 200000
//	go run ./scripts/bench-topics -url ... -pid ... -n 200000 -topics 1   # the same jobs in one topic
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:7480", "the server's HTTP base URL")
	pid := flag.Int("pid", 0, "the server's process id, for its RSS")
	n := flag.Int("n", 200_000, "jobs, each put, reserved and finished")
	k := flag.Int("topics", 0, "distinct topics (0: one per job)")
	prefix := flag.String("prefix", "t", "topic name prefix")
	wait := flag.Duration("wait", 150*time.Second, "idle time before the last RSS reading")
	flag.Parse()
	if *k <= 0 {
		*k = *n
	}
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 64
	topic := func(i int) string { return fmt.Sprintf("%s%d", *prefix, i%*k) }
	report := func(what string) { fmt.Printf("%-28s %s\n", what, rss(*pid)) }
	report("before")
	start := time.Now()
	for lo := 0; lo < *n; lo += 1000 {
		hi := min(lo+1000, *n)
		putAll(*base, topic, lo, hi)
		var topics []string
		seen := map[string]bool{}
		for i := lo; i < hi; i++ {
			if t := topic(i); !seen[t] {
				seen[t] = true
				topics = append(topics, t)
			}
		}
		var got struct {
			Jobs []struct{ ID, Reservation string }
		}
		post(*base+"/v1/reserve", map[string]any{"topics": topics, "n": 1000}, &got)
		refs := make([]map[string]string, len(got.Jobs))
		for i, j := range got.Jobs {
			refs[i] = map[string]string{"id": j.ID, "reservation": j.Reservation}
		}
		if len(refs) > 0 {
			post(*base+"/v1/jobs/finish", map[string]any{"jobs": refs}, nil)
		}
		if hi%20_000 == 0 {
			report(fmt.Sprintf("%d jobs, %s", hi, time.Since(start).Round(time.Second)))
		}
	}
	report("done")
	time.Sleep(*wait)
	report(fmt.Sprintf("after %s idle", *wait))
}

// putAll puts one job for each i in [lo, hi) into topic(i), 16 at a time.
func putAll(base string, topic func(int) string, lo, hi int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				post(base+"/v1/topics/"+topic(i)+"/jobs", map[string]any{"body": "x"}, nil)
			}
		})
	}
	for i := lo; i < hi; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// post sends in as JSON and decodes the answer into out (nil: none); any
// failure ends the run.
func post(url string, in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		log.Fatal(err)
	}
	res, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		var e map[string]any
		_ = json.NewDecoder(res.Body).Decode(&e)
		log.Fatalf("POST %s: %d %v", url, res.StatusCode, e)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			log.Fatal(err)
		}
	}
}

// rss reads VmRSS and VmHWM of process pid.
func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

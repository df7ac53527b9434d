package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/limits"
)

// putCost is what p will cost in memory once decoded and on its way to
// the store, before any of it is allocated (limits.PutCost says why it is
// more than its wire bytes).
func putCost(p *api.PutRequest) int64 {
	n := 0
	switch {
	case p.BodyBase64 != nil:
		n = base64.StdEncoding.DecodedLen(len(*p.BodyBase64))
	case p.Body != nil:
		n = len(*p.Body)
	}
	return limits.PutCost(n, len(p.ID))
}

// chargePut charges what p will cost to the request's share of
// --max-inflight-bytes (limits.Bytes), waiting as a body read waits. The
// bytes stay charged until the request is answered: the copies live at
// least until the store has the job, and the strings a batch drops are
// garbage the collector may not yet have reclaimed.
func chargePut(ctx context.Context, p *api.PutRequest) error {
	return limits.ChargeFrom(ctx).Take(ctx, putCost(p))
}

// listChunk is how many jobs a list answer holds at once: it is read
// from the store, charged, encoded and written a chunk at a time, so a
// page of 1,000 large jobs costs one chunk of memory, not the page
// (issue 28: a client that asked for such a page and never read it
// pinned hundreds of MiB).
const listChunk = 32

// listCost is what a chunk of jobs costs in memory until it is written:
// the jobs as read, their wire form and its encoding, and their fields.
func listCost(jobs []*delayq.Job) int64 {
	n := int64(0)
	for _, j := range jobs {
		n += 3*int64(len(j.Body)) + 1<<10
	}
	return n
}

// streamJobs answers a list page a chunk at a time (listChunk), each
// charged to the request's share of the bytes in flight before it is
// encoded and given back once written. The answer is the JSON of one
// api.JobsResponse, as a single read would write it. An error before the
// first chunk is answered as usual; after it only cutting the answer off
// can tell the client, which the JSON's missing end makes plain.
func (h *handler) streamJobs(w http.ResponseWriter, r *http.Request, p engine.ListRequest) {
	ctx := r.Context()
	if p.Limit < 0 || p.Limit > engine.MaxListLimit {
		_, err := h.e.List(ctx, p) // refuses it, in the engine's words
		h.writeError(w, r, err)
		return
	}
	left := p.Limit
	if left == 0 {
		left = engine.DefaultListLimit
	}
	charge := limits.ChargeFrom(ctx)
	var buf []byte
	started := false
	fail := func(err error) {
		if !started {
			h.writeError(w, r, err)
			return
		}
		h.log.Warn("list answer cut off", "topic", p.Topic, "err", err)
		panic(http.ErrAbortHandler) // closes the connection mid-answer
	}
	for {
		res, err := h.e.List(ctx, engine.ListRequest{Topic: p.Topic, State: p.State, Cursor: p.Cursor, Limit: min(left, listChunk)})
		if err != nil {
			fail(err)
			return
		}
		cost := listCost(res.Jobs)
		if err := charge.Take(ctx, cost); err != nil {
			fail(err)
			return
		}
		hideReservations(r, res.Jobs...)
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			buf = append(buf, `{"jobs":[`...)
		} else if len(res.Jobs) > 0 {
			buf = append(buf, ',')
		}
		for i, j := range res.Jobs {
			if i > 0 {
				buf = append(buf, ',')
			}
			wj := api.FromJob(j)
			buf = wj.AppendJSON(buf)
		}
		left -= len(res.Jobs)
		p.Cursor = res.Next
		done := res.Next == "" || left <= 0
		if done {
			buf = append(buf, ']')
			if res.Next != "" {
				next, _ := json.Marshal(res.Next)
				buf = append(append(buf, `,"next":`...), next...)
			}
			buf = append(buf, "}\n"...)
		}
		_, err = w.Write(buf)
		charge.Give(cost)
		if err != nil || done {
			return // a write that failed has cut the connection already
		}
		buf = buf[:0]
	}
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	beanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/delayq/delayq/api"
)

// httpDriver speaks delayq's HTTP v1 API; one shared client with enough
// idle connections for every worker.
type httpDriver struct {
	base string
	hc   *http.Client
}

func newHTTPDriver(base string) *httpDriver {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	return &httpDriver{base: base, hc: &http.Client{Transport: tr}}
}

func (d *httpDriver) call(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("bench: %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

func (d *httpDriver) put(ctx context.Context, topic string, body []byte, dues []time.Time) error {
	reqs := make([]api.PutRequest, len(dues))
	for i, due := range dues {
		s := string(stamp(body, due))
		reqs[i] = api.PutRequest{Body: &s, At: &api.Time{Time: due}}
	}
	path := "/v1/topics/" + url.PathEscape(topic) + "/jobs"
	if len(reqs) == 1 {
		return d.call(ctx, path, reqs[0], nil)
	}
	return d.call(ctx, path+"/batch", api.BatchRequest{Jobs: reqs}, nil)
}

func (d *httpDriver) reserve(ctx context.Context, topics []string, n int, wait time.Duration) ([]job, error) {
	w := api.Duration(wait)
	var out api.JobsResponse
	if err := d.call(ctx, "/v1/reserve", api.ReserveRequest{Topics: topics, N: n, Wait: &w}, &out); err != nil {
		return nil, err
	}
	jobs := make([]job, len(out.Jobs))
	for i, j := range out.Jobs {
		if j.Body == nil {
			return nil, errors.New("bench: job body is not text")
		}
		jobs[i] = job{id: j.ID + "\x00" + j.Reservation, body: []byte(*j.Body)}
	}
	return jobs, nil
}

// finish finishes one job with its own call, several with one batch
// finish (POST /v1/jobs/finish), failing if any entry failed.
func (d *httpDriver) finish(ctx context.Context, jobs []job) error {
	refs := make([]api.FinishRef, len(jobs))
	for i, j := range jobs {
		id, res, _ := strings.Cut(j.id, "\x00")
		refs[i] = api.FinishRef{ID: id, Reservation: res}
	}
	if len(refs) == 1 {
		return d.call(ctx, "/v1/jobs/"+url.PathEscape(refs[0].ID)+"/finish", api.ActionRequest{Reservation: refs[0].Reservation}, nil)
	}
	var out api.FinishBatchResponse
	if err := d.call(ctx, "/v1/jobs/finish", api.FinishBatchRequest{Jobs: refs}, &out); err != nil {
		return err
	}
	if len(out.Results) != len(refs) {
		return fmt.Errorf("bench: batch finish of %d jobs answered %d results", len(refs), len(out.Results))
	}
	for _, r := range out.Results {
		if !r.OK {
			return fmt.Errorf("bench: finish %s: %v", r.ID, r.Error.Err(http.StatusOK))
		}
	}
	return nil
}

func (d *httpDriver) close() error { return nil }

// beanstalkDriver speaks the beanstalkd protocol on its own connection,
// through the go-beanstalk client every Go user of beanstalkd has.
type beanstalkDriver struct {
	c    *beanstalk.Conn
	tube *beanstalk.Tube // the tube used last; a put to another one switches
	set  *beanstalk.TubeSet
}

func dialBeanstalk(addr string) (driver, error) {
	c, err := beanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &beanstalkDriver{c: c}, nil
}

func (d *beanstalkDriver) put(_ context.Context, topic string, body []byte, dues []time.Time) error {
	if d.tube == nil || d.tube.Name != topic {
		d.tube = beanstalk.NewTube(d.c, topic)
	}
	for _, due := range dues {
		// beanstalkd's delay is whole seconds: round up so no job is asked
		// to fire early; lateness is measured against the time asked for.
		delay := time.Duration(math.Ceil(time.Until(due).Seconds())) * time.Second
		if _, err := d.tube.Put(stamp(body, due), 1024, max(delay, 0), 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// reserve takes one job whatever n is: the protocol has no batch reserve
// (Run refuses Take > 1 for it). The connection watches every topic of
// the run (the client sends the watch commands with the first reserve).
func (d *beanstalkDriver) reserve(_ context.Context, topics []string, _ int, wait time.Duration) ([]job, error) {
	if d.set == nil {
		d.set = beanstalk.NewTubeSet(d.c, topics...)
	}
	id, body, err := d.set.Reserve(wait)
	var ce beanstalk.ConnError
	if errors.As(err, &ce) && (ce.Err == beanstalk.ErrTimeout || ce.Err == beanstalk.ErrDeadline) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []job{{id: fmt.Sprint(id), body: body}}, nil
}

func (d *beanstalkDriver) finish(_ context.Context, jobs []job) error {
	for _, j := range jobs {
		var id uint64
		if _, err := fmt.Sscan(j.id, &id); err != nil {
			return err
		}
		if err := d.c.Delete(id); err != nil {
			return err
		}
	}
	return nil
}

func (d *beanstalkDriver) close() error { return d.c.Close() }

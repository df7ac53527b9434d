package beanstalk

import (
	"errors"
	"log/slog"
	"strconv"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/audit"
)

// audit writes the audit record of a change this connection asked for
// outside the job hot path: a delete of a job it does not hold, a kick,
// a pause-tube (package audit). err is the command's outcome.
func (c *conn) audit(action, target string, err error, extra ...slog.Attr) {
	a := audit.Actor{Protocol: "beanstalk", Remote: c.remote}
	if c.principal != nil {
		a.Principal = c.principal.Name
	}
	outcome := audit.Outcome(err)
	if errors.Is(err, errNotFound) {
		outcome = delayq.CodeNotFound
	}
	audit.Log(c.ctx, c.srv.logger(), &a, action, target, outcome, extra...)
}

// jobTarget names a job of the beanstalkd protocol: by id when known (as
// HTTP's records do), else by its number.
func jobTarget(seq uint64, j *delayq.Job) string {
	if j != nil {
		return "job:" + j.ID
	}
	return "seq:" + strconv.FormatUint(seq, 10)
}

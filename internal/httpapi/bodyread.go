package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/delayq/delayq"
)

// bodyError says what a failed read of r's body means. A body over the
// limit, or refused by a limit, keeps its own error; a body the client
// stopped sending because it went away is for the log only (nobody reads
// the answer). Any other failure is the client's: a malformed chunk of
// chunked transfer encoding, or a body cut short of its Content-Length.
// That is a 400 malformed_body, not a 500 internal: the server is fine.
func bodyError(r *http.Request, err error) error {
	var mbe *http.MaxBytesError
	var le *delayq.LimitError
	var ve *delayq.ValidationError
	switch {
	case errors.As(err, &mbe), errors.As(err, &le), errors.As(err, &ve):
		return err
	case r.Context().Err() != nil:
		return fmt.Errorf("reading the request body: %w", errors.Join(err, context.Cause(r.Context())))
	}
	return delayq.Invalid(delayq.CodeMalformedBody, "", "the request body could not be read (%v); send it whole, with a correct Content-Length or chunked encoding", err)
}

// readErrors passes body's reads on with their errors named by bodyError,
// for the decoders that read a body as a stream.
type readErrors struct {
	r    *http.Request
	body io.Reader
}

func (b readErrors) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && err != io.EOF {
		err = bodyError(b.r, err)
	}
	return n, err
}

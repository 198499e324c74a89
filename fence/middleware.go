package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/fencer-io/fencer/api/wire"
)

// MaxBodyBytes bounds the request body Middleware reads before opening the
// write transaction; larger bodies get 413.
const MaxBodyBytes = 8 << 20

// errHandlerRefused rolls the transaction back when the wrapped handler
// answered with a status of 400 or more; it never reaches the client.
var errHandlerRefused = errors.New("fence: handler refused the write")

type txContextKey struct{}

// TxFromContext returns the fenced transaction Middleware opened for the
// request, or nil outside Middleware.
func TxFromContext(ctx context.Context) *Tx {
	tx, _ := ctx.Value(txContextKey{}).(*Tx)
	return tx
}

// Middleware fences every request through it on the key keyFunc names.
//
// A request without a valid Fencing-Token gets 428 (code missing_token); a
// malformed Fencing-Sequence gets 400; a token not above the key's high-water
// mark gets 409 (code stale_token, with last_token) and the handler is not
// called. Otherwise the handler runs inside the store's write transaction and
// reaches it with TxFromContext.
//
// The handler's response is buffered, not sent: the mark and the handler's
// writes commit only if the handler answered with a status below 400, and
// only once the commit (with its fsync) has succeeded is the buffered
// response sent. So a client never sees a 2xx for a write that did not
// become durable: a failed commit turns into a 500 instead. A handler status
// of 400 or more rolls everything back and is sent as the handler wrote it.
// Handlers therefore cannot stream or hijack, and should be quick, because
// bbolt serialises write transactions. For the same reason the request body
// is read in full (up to MaxBodyBytes) before the transaction opens, so a
// slow client cannot hold the store's write lock.
func Middleware(store *Store, keyFunc func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, seq, err := fenceFromHeader(r.Header)
			if err != nil {
				writeError(w, err)
				return
			}
			key := keyFunc(r)
			if key == "" {
				writeError(w, ErrEmptyKey)
				return
			}
			if r.Body != nil {
				body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
				if err != nil {
					writeError(w, err)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}

			buf := newBufferedResponse()
			err = store.UpdateSeq(key, token, seq, func(tx *Tx) error {
				next.ServeHTTP(buf, r.WithContext(context.WithValue(r.Context(), txContextKey{}, tx)))
				if buf.statusCode() >= http.StatusBadRequest {
					return errHandlerRefused
				}
				return nil
			})
			if err != nil && !errors.Is(err, errHandlerRefused) {
				writeError(w, err)
				return
			}
			buf.sendTo(w)
		})
	}
}

// fenceFromHeader reads the token and optional sequence. A header sent twice
// is malformed: picking one of two tokens is guessing.
func fenceFromHeader(h http.Header) (token, seq uint64, err error) {
	tokens := h.Values(wire.HeaderToken)
	if len(tokens) != 1 {
		return 0, 0, fmt.Errorf("%w: %d %s headers", ErrMissingToken, len(tokens), wire.HeaderToken)
	}
	if token, err = ParseToken(tokens[0]); err != nil {
		return 0, 0, err
	}
	switch seqs := h.Values(wire.HeaderSequence); len(seqs) {
	case 0:
		return token, 0, nil
	case 1:
		seq, err = ParseSequence(seqs[0])
		return token, seq, err
	default:
		return 0, 0, fmt.Errorf("%w: %d %s headers", ErrMalformedSequence, len(seqs), wire.HeaderSequence)
	}
}

// StatusFor maps a fence error to its HTTP status. It is the only place
// where fence errors become statuses.
func StatusFor(err error) int {
	var maxBytes *http.MaxBytesError
	switch {
	case errors.Is(err, ErrMissingToken):
		return http.StatusPreconditionRequired
	case errors.Is(err, ErrStaleToken):
		return http.StatusConflict
	case errors.Is(err, ErrMalformedSequence), errors.Is(err, ErrEmptyKey):
		return http.StatusBadRequest
	case errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// WriteError writes err as a wire.Error body with the status StatusFor picks.
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }

func writeError(w http.ResponseWriter, err error) {
	status := StatusFor(err)
	body := &wire.Error{Message: err.Error(), Code: Code(err)}
	if body.Code == "" {
		body.Code = wire.CodeInternal
		if status == http.StatusRequestEntityTooLarge {
			body.Code = wire.CodeBodyTooLarge
		}
	}
	var stale *StaleError
	if errors.As(err, &stale) {
		body.LastToken, body.LastSeq = stale.HighWater, stale.HighSeq
	}
	wire.WriteError(w, status, body)
}

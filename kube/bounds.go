package kube

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// The caps on what volrecon reads from the API server. A node runs at most
// a few hundred pods (the kubelet's --max-pods is 110 by default); the
// kubectl JSON of 1,000 pods is a few MB and their protobuf, which Client
// asks for, about half that. An API server, a proxy in front of it or an
// aggregation layer that answers more is hostile or broken, and its answer
// is unknown: never read to the end, never decoded.
const (
	// DefaultMaxResponseBytes caps one answer: one response, and one list,
	// all its pages together. The cap applies to the body as it arrives
	// (gzip already undone), before anything of it is decoded.
	DefaultMaxResponseBytes = 16 << 20
	// DefaultMaxEventBytes caps one event of a watch. The API server stores
	// an object of at most 1.5 MiB (etcd's default request limit); its JSON
	// may be twice that.
	DefaultMaxEventBytes = 4 << 20
)

// ClientOptions configure NewClient; zero values are the defaults.
type ClientOptions struct {
	MaxResponseBytes int64 // 0 = DefaultMaxResponseBytes
	MaxEventBytes    int64 // 0 = DefaultMaxEventBytes
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = DefaultMaxEventBytes
	}
	return o
}

// ResponseTooLargeError: the API server's answer to Request was larger than
// volrecon reads (Limit bytes of What: "a response", "a list (all its
// pages together)" or "a watch event"). Nothing of it is decoded; the
// answer is unknown.
type ResponseTooLargeError struct {
	Request string // method and path with query, e.g. "GET /api/v1/pods?limit=500"
	What    string
	Limit   int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the API server's answer to %s is too large: %s of more than %s (the cap), not read further",
		e.Request, e.What, byteSize(e.Limit))
}

// ResponseTooSlowError: the API server gave no complete answer within
// Timeout (one that never came, or trickled in too slowly). Err is the
// error the deadline caused. The answer is unknown.
type ResponseTooSlowError struct {
	Timeout time.Duration
	Err     error
}

func (e *ResponseTooSlowError) Error() string {
	return fmt.Sprintf("the API server's answer is too slow: not complete within %s (the cap): %v", e.Timeout, e.Err)
}

func (e *ResponseTooSlowError) Unwrap() error { return e.Err }

// withDeadline runs call within timeout; a call the deadline ended (and
// not ctx itself) fails with a *ResponseTooSlowError.
func withDeadline(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	bounded, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := call(bounded)
	if err != nil && ctx.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded) {
		return &ResponseTooSlowError{Timeout: timeout, Err: err}
	}
	return err
}

// getWithin is withDeadline for a call that returns a value.
func getWithin[T any](ctx context.Context, timeout time.Duration, get func(context.Context) (T, error)) (T, error) {
	var v T
	err := withDeadline(ctx, timeout, func(ctx context.Context) error {
		var err error
		v, err = get(ctx)
		return err
	})
	return v, err
}

func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// boundedTransport caps every response body: a watch's per event, any
// other response as a whole, and the pages of one list (listBudget in the
// request's context) together.
type boundedTransport struct {
	next http.RoundTripper
	opts ClientOptions
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	request := req.Method + " " + req.URL.RequestURI()
	if resp.StatusCode == http.StatusOK && req.URL.Query().Get("watch") == "true" {
		resp.Body = newEventLimiter(resp.Body, resp.Header.Get("Content-Type"), t.opts.MaxEventBytes, request)
		return resp, nil
	}
	body := &limitedBody{body: resp.Body, request: request, limit: t.opts.MaxResponseBytes,
		budget: budgetFrom(req.Context())}
	// A length announced past the cap fails before a byte is read.
	if err := body.fits(resp.ContentLength); err != nil {
		resp.Body.Close()
		return nil, err
	}
	resp.Body = body
	return resp, nil
}

// listBudget is what the pages of one list have read so far, shared by
// their requests through the context (withListBudget).
type listBudget struct {
	mu   sync.Mutex
	used int64
}

type budgetKey struct{}

// withListBudget marks ctx as one list's: every response read under it
// counts against one cap, the client's MaxResponseBytes.
func withListBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, budgetKey{}, &listBudget{})
}

func budgetFrom(ctx context.Context) *listBudget {
	b, _ := ctx.Value(budgetKey{}).(*listBudget)
	return b
}

// limitedBody fails a read that would take its response, or its list, past
// the cap.
type limitedBody struct {
	body    io.ReadCloser
	request string
	limit   int64
	budget  *listBudget // nil outside a list
	read    int64       // bytes of this response so far
	err     error
}

// fits says whether n more bytes of this response stay within the caps.
func (b *limitedBody) fits(n int64) error {
	if b.read+n > b.limit {
		return &ResponseTooLargeError{Request: b.request, What: "a response", Limit: b.limit}
	}
	if b.budget != nil {
		b.budget.mu.Lock()
		defer b.budget.mu.Unlock()
		if b.budget.used+n > b.limit {
			return &ResponseTooLargeError{Request: b.request, What: "a list (all its pages together)", Limit: b.limit}
		}
	}
	return nil
}

// take counts n more bytes of this response, or fails.
func (b *limitedBody) take(n int64) error {
	if err := b.fits(n); err != nil {
		return err
	}
	if b.budget != nil {
		b.budget.mu.Lock()
		b.budget.used += n
		b.budget.mu.Unlock()
	}
	b.read += n
	return nil
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if b.err = b.take(int64(n)); b.err != nil {
		return 0, b.err
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

// eventLimiter fails a watch stream at the first event larger than the
// cap, as soon as it is seen to be: protobuf events are length-prefixed
// frames (the prefix says), JSON events are top-level values, followed
// through their strings and brackets (a line is no event: pretty JSON
// breaks an event into many).
type eventLimiter struct {
	body     io.ReadCloser
	request  string
	limit    int64
	protobuf bool
	err      error

	// protobuf
	header  [4]byte // the frame's length prefix, as read so far
	inHead  int     // bytes of header read
	payload int64   // bytes of the current frame's payload still to come

	// JSON
	size             int64 // bytes of the current top-level value so far
	depth            int   // of brackets, outside strings
	inString, escape bool
}

func newEventLimiter(body io.ReadCloser, contentType string, limit int64, request string) *eventLimiter {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	return &eventLimiter{body: body, request: request, limit: limit,
		protobuf: mediaType == "application/vnd.kubernetes.protobuf"}
}

func (l *eventLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.body.Read(p)
	if l.err = l.count(p[:n]); l.err != nil {
		return 0, l.err
	}
	return n, err
}

// count follows the framing through b, failing on an event over the cap.
func (l *eventLimiter) count(b []byte) error {
	var over bool
	if l.protobuf {
		over = l.countFrames(b)
	} else {
		over = l.countJSON(b)
	}
	if over {
		return &ResponseTooLargeError{Request: l.request, What: "a watch event", Limit: l.limit}
	}
	return nil
}

// countFrames follows length-prefixed frames; true at a prefix past the cap.
func (l *eventLimiter) countFrames(b []byte) bool {
	for len(b) > 0 {
		if l.payload > 0 {
			skip := min(int64(len(b)), l.payload)
			l.payload -= skip
			b = b[skip:]
			continue
		}
		l.header[l.inHead] = b[0]
		l.inHead++
		b = b[1:]
		if l.inHead == len(l.header) {
			l.inHead = 0
			l.payload = int64(binary.BigEndian.Uint32(l.header[:]))
			if l.payload > l.limit {
				return true
			}
		}
	}
	return false
}

// countJSON follows top-level JSON values; true once one is past the cap.
// Only whitespace between values is free: anything else at the top level
// counts (the decoder refuses what is not an object).
func (l *eventLimiter) countJSON(b []byte) bool {
	for _, c := range b {
		l.size++
		switch {
		case l.inString && l.escape:
			l.escape = false
		case l.inString && c == '\\':
			l.escape = true
		case l.inString && c == '"':
			l.inString = false
		case l.inString:
		case c == '"':
			l.inString = true
		case c == '{' || c == '[':
			l.depth++
		case (c == '}' || c == ']') && l.depth > 0:
			l.depth--
			if l.depth == 0 {
				l.size = 0 // the end of a value
			}
		case l.depth == 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			l.size = 0
		}
		if l.size > l.limit {
			return true
		}
	}
	return false
}

func (l *eventLimiter) Close() error { return l.body.Close() }

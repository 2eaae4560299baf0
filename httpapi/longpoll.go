package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"stratum/wire"
	"strconv"
	"time"
)

// A held long-poll does not keep net/http's two goroutines per connection
// (the handler's and its background reader's, with their stacks and
// buffers: about half of a waiter's memory at 10,000 waiters). The
// handler takes the connection over (Hijack), the join service parks the
// poll on a hub watch and a timer, and the answer is written to the
// connection when the state changes, with Connection: close: the joiner
// opens a new connection for its next poll, once a minute at most.

// parkPoll answers the long-poll at once when it need not wait, else
// parks it on a connection taken over from net/http. parked false with a
// nil error means the view was written the ordinary way.
func (a *API) parkPoll(w http.ResponseWriter, r *http.Request, pin, joinID, state string, wait time.Duration) error {
	ready := make(chan struct{})
	var conn net.Conn
	// The answer keeps only what it writes and logs: holding r or w for
	// the whole wait would keep net/http's request and response (their
	// buffers, the peer's certificate) alive for every parked poll.
	requestID, method, path := w.Header().Get("X-Request-Id"), r.Method, r.URL.Path
	answer := func(v wire.JoinerView, err error) {
		if conn == nil {
			return
		}
		defer conn.Close()
		_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		rec := newBufferedResponse(requestID)
		if err != nil {
			writeError(rec, &http.Request{Method: method, URL: &url.URL{Path: path}}, a.log, err)
		} else {
			writeJSON(rec, http.StatusOK, v)
		}
		if werr := rec.writeTo(conn); werr != nil {
			a.log.Debug("long-poll answer not delivered", "joinId", joinID, "err", werr)
		}
	}
	first, end, err := a.Joiners.Park(pin, joinID, state, wait, ready, answer)
	if err != nil {
		close(ready)
		return err
	}
	if end == nil {
		close(ready)
		writeJSON(w, http.StatusOK, first)
		return nil
	}
	c, brw, herr := http.NewResponseController(w).Hijack()
	if herr != nil {
		// Not HTTP/1.1 (or a test recorder): hold the goroutine instead.
		close(ready)
		return a.holdPoll(w, r, pin, joinID, state, wait, herr)
	}
	_ = c.SetReadDeadline(time.Time{})
	conn = c
	close(ready)
	_ = brw // its buffer is not kept: nothing pipelined behind a long-poll is served
	go endWhenGone(c, end)
	return nil
}

// endWhenGone ends a parked poll when its client leaves (a joiner that
// failed over, an agent restarted): the hold it counts against its
// registration (SPEC 10.10) must not outlive it. It reads until the
// connection fails; writing the answer and closing the connection end the
// read too. Nothing a client sends behind a long-poll is served.
func endWhenGone(r io.Reader, end func()) {
	buf := make([]byte, 64)
	for {
		if _, err := r.Read(buf); err != nil {
			end()
			return
		}
	}
}

// holdPoll is the fallback when the connection cannot be taken over: the
// parked answer is written through w by this goroutine.
func (a *API) holdPoll(w http.ResponseWriter, r *http.Request, pin, joinID, state string, wait time.Duration, why error) error {
	if !errors.Is(why, http.ErrNotSupported) {
		a.log.Debug("long-poll held without taking the connection over", "err", why)
	}
	holdLongPoll(w, wait)
	view, err := a.Joiners.Wait(r.Context(), pin, joinID, state, wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// bufferedResponse collects an answer made by the usual writers
// (writeJSON, writeError) for a connection net/http no longer serves.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newBufferedResponse(requestID string) *bufferedResponse {
	h := http.Header{}
	if requestID != "" {
		h.Set("X-Request-Id", requestID)
	}
	return &bufferedResponse{header: h}
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

// writeTo writes the whole HTTP/1.1 response in one write (one TLS
// record for a joiner's view: thousands are answered at once at
// shutdown), telling the client the connection closes after it.
func (b *bufferedResponse) writeTo(w io.Writer) error {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	b.header.Set("Content-Length", strconv.Itoa(b.body.Len()))
	b.header.Set("Connection", "close")
	var out bytes.Buffer
	out.Grow(256 + b.body.Len())
	out.WriteString("HTTP/1.1 " + strconv.Itoa(b.status) + " " + http.StatusText(b.status) + "\r\n")
	if err := b.header.Write(&out); err != nil {
		return err
	}
	out.WriteString("\r\n")
	out.Write(b.body.Bytes())
	_, err := w.Write(out.Bytes())
	return err
}

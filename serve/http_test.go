package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testLimits are serve's HTTP limits made small, so that each bound shows
// within a bounded loop on loopback.
var testLimits = HTTPLimits{
	ReadHeader: 300 * time.Millisecond,
	Read:       time.Second,
	Write:      300 * time.Millisecond,
	Idle:       300 * time.Millisecond,
	MaxHeader:  1 << 10,
	MaxConns:   8,
}

// serveOnLoopback runs s.serve(ctx) on a new listener on loopback, and
// returns its address; when the test ends it cancels ctx, and serve must
// return no error.
func serveOnLoopback(t testing.TB, s *Server, ctx context.Context, cancel context.CancelFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return ln.Addr().String()
}

// startServe runs serve on the demo node on loopback with limits, and
// returns its address once /readyz answers (a scan succeeded).
func startServe(t testing.TB, limits HTTPLimits) (*Server, string) {
	t.Helper()
	hostRoot, mountinfo := demoNode(t)
	s := newTestServer(t, nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), time.Hour)
	s.limits = limits
	var err error
	s.reportLn, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	addr := serveOnLoopback(t, s, ctx, cancel)
	require.Eventually(t, func() bool { code, _, _ := tryGet("http://" + addr + "/readyz"); return code == http.StatusOK },
		60*time.Second, 10*time.Millisecond)
	http.DefaultClient.CloseIdleConnections() // tryGet's keep-alive connection
	require.Eventually(t, func() bool { return s.openConns() == 0 }, 10*time.Second, time.Millisecond)
	return s, addr
}

// openConns is how many connections serve holds, on both listeners.
func (s *Server) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listener.open() + s.reportListener.open()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer waits for the server to close c, reading and
// discarding whatever it sent before: at most 20 s, far past the test
// limits' timeouts (under a loaded race-detector run 5 s was once not
// enough), yet a connection serve never closes fails.
func closedByServer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return errors.New("still open after 20s")
	}
	return nil // EOF (io.Copy's nil) or a reset: closed
}

// Idle connections past the cap are closed as soon as accepted; those
// within it are closed once they sent no request for the header timeout;
// then /healthz answers again.
func TestServeCapsConnections(t *testing.T) {
	s, addr := startServe(t, testLimits)
	var held []net.Conn
	for range 200 {
		held = append(held, dial(t, addr))
	}
	require.Eventually(t, func() bool { return s.openConns() == testLimits.MaxConns }, 10*time.Second, time.Millisecond)
	closed := 0
	for _, c := range held {
		if closedByServer(c) == nil {
			closed++
		}
	}
	assert.Equal(t, 200, closed, "every one closed: past the cap at once, the others at the header timeout")
	require.Eventually(t, func() bool { return s.openConns() == 0 }, 10*time.Second, 10*time.Millisecond)
	code, _ := get(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code)
}

// Each state of a connection is bounded: a request whose headers trickle
// in (slowloris), a keep-alive connection left idle, a client that stops
// reading a large response, and headers past the cap; /healthz answers
// throughout.
func TestServeBoundsEveryConnection(t *testing.T) {
	s, addr := startServe(t, testLimits)
	healthz := func() {
		t.Helper()
		code, _ := get(t, "http://"+addr+"/healthz")
		assert.Equal(t, http.StatusOK, code)
	}

	t.Run("headers that trickle", func(t *testing.T) {
		c := dial(t, addr)
		_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		stop := make(chan struct{})
		go func() { // one header line every 50 ms, never the end of them
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := io.WriteString(c, "X-Slow: 1\r\n"); err != nil {
						return
					}
				}
			}
		}()
		defer close(stop)
		healthz()
		require.NoError(t, closedByServer(c))
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t, addr)
		_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.False(t, resp.Close, "kept alive")
		require.NoError(t, closedByServer(c), "closed at the idle timeout")
	})
	t.Run("a client that stops reading", func(t *testing.T) {
		// A report of 64 MiB, served decompressed: far more than the
		// socket buffers hold.
		var big bytes.Buffer
		zw := gzip.NewWriter(&big)
		_, _ = zw.Write(bytes.Repeat([]byte(" "), 64<<20))
		require.NoError(t, zw.Close())
		s.mu.Lock()
		saved := s.latest
		s.latest = &latestReport{gz: big.Bytes()}
		s.latest.once.Do(func() {})
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.latest = saved; s.mu.Unlock() }()

		c := dial(t, s.reportLn.Addr().String())
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4<<10))
		_, err := io.WriteString(c, "GET /report HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		// Never read: the server's write blocks until its deadline.
		require.Eventually(t, func() bool { return s.openConns() == 0 }, 10*time.Second, 10*time.Millisecond,
			"the connection is closed at the write timeout")
		healthz()
	})
	t.Run("headers past the cap", func(t *testing.T) {
		c := dial(t, addr)
		_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
		if err != nil { // the server may close before all of it is sent
			require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
			resp.Body.Close()
		}
		require.NoError(t, closedByServer(c))
		healthz()
	})
}

// BenchmarkServeHeldConnections opens 4,000 idle connections and 300 that
// stall in their headers against serve on loopback, and reports how many
// serve holds (held-conns) and the heap and stacks they cost it
// (conn-MiB: HeapInuse + StackInuse over an idle server, client side
// included), with serve's limits and with the connection cap lifted (as
// serve was before: every one held until a timeout).
func BenchmarkServeHeldConnections(b *testing.B) {
	const idle, stalled = 4000, 300
	uncapped := DefaultHTTPLimits
	uncapped.MaxConns = 1 << 20
	for _, c := range []struct {
		name   string
		limits HTTPLimits
	}{{"serve", DefaultHTTPLimits}, {"uncapped", uncapped}} {
		b.Run(c.name, func(b *testing.B) {
			s, addr := startServe(b, c.limits)
			want := min(idle+stalled, c.limits.MaxConns)
			var held, bytesHeld float64
			for b.Loop() {
				base := heapAndStacks()
				var conns []net.Conn
				for i := range idle + stalled {
					conn, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					if i >= idle {
						_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
					}
					conns = append(conns, conn)
				}
				for s.openConns() < want {
					time.Sleep(time.Millisecond)
				}
				held += float64(s.openConns())
				bytesHeld += float64(heapAndStacks() - base)
				for _, conn := range conns {
					conn.Close()
				}
				for s.openConns() > 0 {
					time.Sleep(time.Millisecond)
				}
			}
			b.ReportMetric(held/float64(b.N), "held-conns")
			b.ReportMetric(bytesHeld/float64(b.N)/(1<<20), "conn-MiB")
		})
	}
}

func heapAndStacks() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// restDoer sends one REST request and returns the answer's status and body.
type restDoer interface {
	do(ctx context.Context, method, path, body string) (int, []byte, error)
}

// netHTTPClient is Go's http.Client as a restDoer: the client most Go programs use.
type netHTTPClient struct {
	base string // http://host:port
	c    *http.Client
}

func (n netHTTPClient) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := n.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, raw, err
}

// restClient is the load generator's REST side: plain HTTP/1.1 keep-alive connections, each
// used by one caller at a time, the request written and the answer read on the caller's own
// goroutine, as load tools (wrk, h2load) do. Go's http.Client hands every request to a writer
// goroutine and every answer back from a reader goroutine, which on a 2-core machine shared
// with the stack costs the REST side more than the gRPC client costs the gRPC side; the
// benchmarks measure the gateway, not the load generator's client. Both clients' figures are
// reported (see -rest-client).
type restClient struct {
	addr  string // host:port
	conns chan *restConn
}

type restConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

// newRestClient keeps up to n connections to the gateway at base (http://host:port).
func newRestClient(base string, n int) *restClient {
	return &restClient{addr: strings.TrimPrefix(base, "http://"), conns: make(chan *restConn, n)}
}

// do sends method path with a JSON body (none when body is "") and returns the answer's status
// and body. A connection that fails is dropped and the call is not repeated.
func (rc *restClient) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	var c *restConn
	select {
	case c = <-rc.conns:
	default:
		conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", rc.addr)
		if err != nil {
			return 0, nil, err
		}
		c = &restConn{c: conn, r: bufio.NewReaderSize(conn, 4096)}
	}
	code, res, keep, err := c.roundTrip(rc.addr, method, path, body)
	if !keep {
		_ = c.c.Close()
		return code, res, err
	}
	select {
	case rc.conns <- c:
	default:
		_ = c.c.Close()
	}
	return code, res, nil
}

// roundTrip writes one request and reads its answer; keep says whether the connection can
// carry another.
func (c *restConn) roundTrip(host, method, path, body string) (code int, res []byte, keep bool, err error) {
	b := c.buf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	if body != "" {
		b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.buf = b
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.c.Write(b); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, nil, false, err
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, nil, false, err
	}
	return resp.StatusCode, raw, !resp.Close, nil
}

// close closes the idle connections.
func (rc *restClient) close() {
	for {
		select {
		case c := <-rc.conns:
			_ = c.c.Close()
		default:
			return
		}
	}
}

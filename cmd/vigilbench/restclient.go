package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
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
	c        net.Conn
	r        *bufio.Reader
	buf      []byte
	deadline time.Time
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
	if now := time.Now(); c.deadline.Sub(now) < 20*time.Second {
		// A stuck gateway fails the call within 30 s; the deadline moves every 10 s, not on
		// every call.
		c.deadline = now.Add(30 * time.Second)
		_ = c.c.SetDeadline(c.deadline)
	}
	if _, err := c.c.Write(b); err != nil {
		return 0, nil, false, err
	}
	return c.readResponse()
}

// readResponse reads an HTTP/1.1 answer: the status line, the headers it needs
// (Content-Length, Transfer-Encoding, Connection) and the body.
func (c *restConn) readResponse() (code int, body []byte, keep bool, err error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// "HTTP/1.1 201 Created\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("not an HTTP/1.x status line: %q", line)
	}
	if code, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	keep = line[7] == '1' // HTTP/1.1 keeps the connection unless told otherwise
	length, chunked := -1, false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h := bytes.TrimRight(line, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("bad header line %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		body, err = io.ReadAll(httputil.NewChunkedReader(c.r))
		if err == nil {
			// The chunked body ends with a last chunk and an empty trailer line.
			_, err = c.r.ReadSlice('\n')
		}
	case length >= 0:
		body = make([]byte, length)
		_, err = io.ReadFull(c.r, body)
	default:
		body, err = io.ReadAll(c.r) // delimited by the end of the connection
		keep = false
	}
	if err != nil {
		return 0, nil, false, err
	}
	return code, body, keep, nil
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

package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// helperAddrs are the placeholders of the helper servers an action can
// act on.
var helperAddrs = []string{"http", "tcp_echo", "tcp_silent", "smtp"}

// reachesHelpers says whether a fixture sends the plugin to a helper
// server, so that its contacts show the plugin's effects.
func (e *runEnv) reachesHelpers(fixtures ...map[string]any) bool {
	b, _ := json.Marshal(fixtures)
	for _, v := range helperAddrs {
		if a := e.vars[v]; a != "" && strings.Contains(string(b), strings.TrimPrefix(a, "http://")) {
			return true
		}
	}
	return false
}

// runEnv is what one run provides to the fixtures: a temp dir and the
// helper servers behind the placeholders. Everything is closed by close.
type runEnv struct {
	// runID tells this run's provider resources apart (ids and a label).
	runID   string
	dir     string
	vars    map[string]string
	servers []*http.Server
	lis     []net.Listener
	conns   sync.WaitGroup
	done    chan struct{}
	// contacts counts requests and connections to the helper servers: an
	// action's effects when it acts on them, whatever it says about them.
	contacts atomic.Int64
}

func newRunEnv() (*runEnv, error) {
	// Short and in /tmp: unix socket paths below it are limited.
	dir, err := os.MkdirTemp("", "unyoconf")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	e := &runEnv{runID: hex.EncodeToString(rnd[:]), dir: dir, done: make(chan struct{}), vars: map[string]string{"tempdir": dir}}
	listen := func() (net.Listener, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			e.lis = append(e.lis, l)
		}
		return l, err
	}
	fail := func(err error) (*runEnv, error) {
		e.close()
		return nil, fmt.Errorf("conformance: helper servers: %w", err)
	}

	hl, err := listen()
	if err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if err != nil || code < 100 || code > 599 {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = w.Write([]byte("ok\n"))
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-e.done:
		}
	})
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.contacts.Add(1)
		mux.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: count, ReadHeaderTimeout: 5 * time.Second}
	e.servers = append(e.servers, hs)
	go func() { _ = hs.Serve(hl) }()
	e.vars["http"] = "http://" + hl.Addr().String()

	echo, err := listen()
	if err != nil {
		return fail(err)
	}
	go e.accept(echo, func(c net.Conn) {
		buf := make([]byte, 512)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(buf); err == nil {
			_, _ = c.Write([]byte("hello\n"))
		}
	})
	e.vars["tcp_echo"] = echo.Addr().String()

	silent, err := listen()
	if err != nil {
		return fail(err)
	}
	go e.accept(silent, func(c net.Conn) {
		select {
		case <-e.done:
		case <-time.After(time.Minute):
		}
	})
	e.vars["tcp_silent"] = silent.Addr().String()

	sl, err := listen()
	if err != nil {
		return fail(err)
	}
	go e.accept(sl, e.serveSMTP)
	e.vars["smtp"] = sl.Addr().String()

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	e.vars["tcp_closed"] = closed.Addr().String()
	closed.Close()
	return e, nil
}

func (e *runEnv) accept(l net.Listener, serve func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		e.contacts.Add(1)
		e.conns.Add(1)
		go func() {
			defer e.conns.Done()
			defer c.Close()
			serve(c)
		}()
	}
}

func (e *runEnv) close() {
	select {
	case <-e.done:
		return
	default:
	}
	close(e.done)
	for _, s := range e.servers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.Shutdown(ctx)
		cancel()
		_ = s.Close()
	}
	for _, l := range e.lis {
		_ = l.Close()
	}
	e.conns.Wait()
	_ = os.RemoveAll(e.dir)
}

// smtpMessages is the file under the run's temp dir where the SMTP helper
// appends one line per accepted message.
const smtpMessages = "smtp-messages"

// serveSMTP is a minimal SMTP server (no TLS, no AUTH) for the {{smtp}}
// placeholder. Each accepted message appends a line to
// {{tempdir}}/smtp-messages before the final 250, so that the line is there
// when the client learns of the success. The recipient's local part picks
// the reply: "hang" is answered only when the client gives up,
// "tempfail" gets 451 and "reject" 550; others are accepted.
func (e *runEnv) serveSMTP(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	go func() {
		// A hanging exchange ends with the run.
		select {
		case <-e.done:
			_ = c.Close()
		case <-time.After(time.Minute):
		}
	}()
	tp := textproto.NewConn(c)
	reply := func(s string) bool { return tp.PrintfLine("%s", s) == nil }
	if !reply("220 unyo-conformance ESMTP") {
		return
	}
	var from string
	var rcpts []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		ok := true
		switch strings.ToUpper(verb) {
		case "EHLO":
			ok = reply("250-unyo-conformance") && reply("250 8BITMIME")
		case "HELO", "NOOP":
			ok = reply("250 OK")
		case "RSET":
			from, rcpts = "", nil
			ok = reply("250 OK")
		case "MAIL":
			from, rcpts = arg, nil
			ok = reply("250 OK")
		case "RCPT":
			addr := strings.Trim(strings.TrimPrefix(strings.TrimPrefix(arg, "TO:"), "to:"), "<> ")
			local, _, _ := strings.Cut(addr, "@")
			switch {
			case from == "":
				ok = reply("503 5.5.1 MAIL first")
			case local == "hang":
				_, _ = tp.ReadLine() // until the client gives up
				return
			case local == "tempfail":
				ok = reply("451 4.3.0 try again later")
			case local == "reject":
				ok = reply("550 5.1.1 no such user")
			default:
				rcpts = append(rcpts, addr)
				ok = reply("250 OK")
			}
		case "DATA":
			if len(rcpts) == 0 {
				ok = reply("503 5.5.1 RCPT first")
				break
			}
			if !reply("354 go ahead") {
				return
			}
			if _, err := tp.ReadDotBytes(); err != nil {
				return
			}
			f, err := os.OpenFile(filepath.Join(e.dir, smtpMessages), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				_, err = fmt.Fprintf(f, "from %s to %s\n", from, strings.Join(rcpts, ","))
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				ok = reply("451 4.3.0 cannot record the message")
				break
			}
			from, rcpts = "", nil
			ok = reply("250 OK")
		case "QUIT":
			_ = reply("221 bye")
			return
		default:
			ok = reply("502 5.5.2 not implemented")
		}
		if !ok {
			return
		}
	}
}

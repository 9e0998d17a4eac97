package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/unyo-ops/unyo/core/server"
)

// Cookie names. The session cookie is HTTP-only (scripts never see it),
// SameSite=Lax (other sites' forms do not carry it) and Secure wherever the
// browser can send it back so: over TLS, and on loopback, which browsers
// count as a secure origin.
const (
	sessionCookie = "unyo_session"
	loginCookie   = "unyo_login"
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
)

// session is one operator's login: the token pages call the API with, who
// it is, and the CSRF token every state-changing request must carry.
type session struct {
	token     string
	principal server.Principal
	csrf      string
	created   time.Time
	seen      time.Time
	flash     string
	problem   string
	// views are the alert lists pages were rendered from, by view id, for
	// their live streams to diff against (live.go).
	views map[string]*view
}

// sessions are kept in memory: a restarted root asks operators to log in
// again, and the token never leaves the server.
type sessions struct {
	mu        sync.Mutex
	m         map[string]*session
	now       func() time.Time
	ttl, idle time.Duration
}

func newSessions(now func() time.Time, ttl, idle time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, now: now, ttl: ttl, idle: idle}
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its id (the cookie's value).
func (s *sessions) create(token string, p server.Principal) (string, *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	// Drop what expired, so that abandoned logins do not pile up.
	for id, ss := range s.m {
		if s.expired(ss, now) {
			delete(s.m, id)
		}
	}
	id := randomID()
	ss := &session{token: token, principal: p, csrf: randomID(), created: now, seen: now, views: map[string]*view{}}
	s.m[id] = ss
	return id, ss
}

func (s *sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.created) > s.ttl || now.Sub(ss.seen) > s.idle
}

// get returns the live session of id and marks it used.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[id]
	if !ok {
		return nil
	}
	now := s.now()
	if s.expired(ss, now) {
		delete(s.m, id)
		return nil
	}
	ss.seen = now
	return ss
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// takeFlash returns and clears the messages for the next page: what was
// done, and what was refused.
func (s *sessions) takeFlash(ss *session) (flash, problem string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	flash, problem = ss.flash, ss.problem
	ss.flash, ss.problem = "", ""
	return flash, problem
}

// setFlash keeps msg for the next page: a flash when ok, else a problem
// (shown in the page's alert box).
func (s *sessions) setFlash(ss *session, msg string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		ss.flash = msg
	} else {
		ss.problem = msg
	}
}

// secureCookies says whether the browser will send a Secure cookie back.
func secureCookies(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: secureCookies(r), SameSite: http.SameSiteLaxMode})
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// sameOrigin refuses requests a browser marks as sent from another site,
// on top of the CSRF token (Fetch Metadata; older browsers omit it).
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

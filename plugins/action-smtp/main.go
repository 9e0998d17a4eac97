// Command unyo-action-smtp is the bundled action plugin that sends mail.
// Subject and body are Go text/template templates over the event or alert
// JSON the action receives (the same payload unyo-action-exec gets on its
// stdin), e.g. "{{.alert.name}} is {{.alert.state}}". The plugin config names
// the server, TLS, PLAIN credentials, sender, default recipients and
// templates; an EventRule's params may replace recipients, subject and body.
//
// Outcomes: a 2xx end of DATA is SUCCEEDED; a 4xx reply at any step, a
// connection that cannot be made or breaks is RETRYABLE; a 5xx reply, a TLS
// certificate that does not verify, a server without STARTTLS when it is
// required or a template that cannot be rendered is FAILED. Any recipient
// refused aborts the transaction before DATA, so a message goes to all
// recipients or to none. A dry run validates the params, renders the message
// and reports it without connecting. Message-ID is derived from the
// idempotency key, so a repeat the SDK no longer remembers can be recognised
// by the receiving side.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	version = "1.0.0"
	// defaultTimeout bounds one SMTP session when the config gives none.
	defaultTimeout = 30 * time.Second
	// maxDryRun bounds the rendered message quoted by a dry run.
	maxDryRun = 4 << 10
	// retryAfter is suggested for RETRYABLE outcomes.
	retryAfter = time.Minute

	defaultSubject = "unyo notification"
	defaultBody    = "{{json .}}\n"
)

// TLS modes.
const (
	tlsNone     = "none"     // plain SMTP, never STARTTLS
	tlsStartTLS = "starttls" // STARTTLS required (the default)
	tlsImplicit = "tls"      // implicit TLS (SMTPS, usually port 465)
)

// Config is plugin-wide.
type Config struct {
	// Server is host:port.
	Server string `json:"server"`
	// TLS is "starttls" (default), "tls" or "none".
	TLS string `json:"tls,omitempty"`
	// CAFile is a PEM bundle trusted instead of the system roots.
	CAFile string `json:"ca_file,omitempty"`
	// ServerName is the name the certificate must carry (server's host).
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any certificate (testing only).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// Username and Password enable AUTH PLAIN.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Helo is the name sent with EHLO (the host name).
	Helo string   `json:"helo,omitempty"`
	From string   `json:"from"`
	To   []string `json:"to"`
	// Subject and Body are templates over the payload.
	Subject string `json:"subject,omitempty"`
	Body    string `json:"body,omitempty"`
	// Timeout bounds one SMTP session (30s); the action's own timeout
	// applies too.
	Timeout sdk.Duration `json:"timeout,omitempty"`
}

// Params come from the EventRule; each given one replaces the config's.
type Params struct {
	To      []string `json:"to,omitempty"`
	Subject string   `json:"subject,omitempty"`
	Body    string   `json:"body,omitempty"`
}

// settings is a validated config.
type settings struct {
	server, host string
	tls          string
	tlsConfig    *tls.Config
	auth         smtp.Auth
	helo         string
	from         *mail.Address
	to           []*mail.Address
	subject      *template.Template
	body         *template.Template
	timeout      time.Duration
}

type smtpAction struct {
	mu  sync.Mutex
	cfg *settings
}

func (*smtpAction) Info() sdk.Info {
	return sdk.Info{Name: "smtp", Version: version, Description: "sends mail with a templated subject and body"}
}

func (*smtpAction) ConfigSchema() string {
	return `{"type":"object","required":["server","from","to"],"additionalProperties":false,"properties":{` +
		`"server":{"type":"string","description":"host:port"},` +
		`"tls":{"enum":["starttls","tls","none"],"default":"starttls"},` +
		`"ca_file":{"type":"string"},"server_name":{"type":"string"},"insecure_skip_verify":{"type":"boolean"},` +
		`"username":{"type":"string"},"password":{"type":"string"},"helo":{"type":"string"},` +
		`"from":{"type":"string"},"to":{"type":"array","items":{"type":"string"},"minItems":1},` +
		`"subject":{"type":"string","description":"Go text/template over the event JSON"},` +
		`"body":{"type":"string","description":"Go text/template over the event JSON"},` +
		`"timeout":{"type":["string","number"],"default":"30s"}}}`
}

var funcs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.MarshalIndent(v, "", "  ")
		return string(b), err
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
}

func parseTemplate(field, text string) (*template.Template, error) {
	t, err := template.New(field).Funcs(funcs).Parse(text)
	if err != nil {
		return nil, sdk.Invalid(field, "is not a valid template: %v", err)
	}
	return t, nil
}

func parseAddrs(field string, list []string) ([]*mail.Address, error) {
	if len(list) == 0 {
		return nil, sdk.Invalid(field, "needs at least one address")
	}
	out := make([]*mail.Address, 0, len(list))
	for i, s := range list {
		a, err := mail.ParseAddress(s)
		if err != nil {
			return nil, sdk.Invalid(fmt.Sprintf("%s[%d]", field, i), "%q is not a mail address: %v", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validate(cfg Config) (*settings, error) {
	s := &settings{server: cfg.Server, tls: cfg.TLS, timeout: time.Duration(cfg.Timeout)}
	host, port, err := net.SplitHostPort(cfg.Server)
	if err != nil || host == "" || port == "" {
		return nil, sdk.Invalid("server", "%q is not host:port", cfg.Server)
	}
	s.host = host
	if s.tls == "" {
		s.tls = tlsStartTLS
	}
	switch s.tls {
	case tlsNone, tlsStartTLS, tlsImplicit:
	default:
		return nil, sdk.Invalid("tls", "%q is not one of starttls, tls, none", cfg.TLS)
	}
	if s.tls != tlsNone {
		s.tlsConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipVerify} //nolint:gosec // opt-in
		if cfg.ServerName != "" {
			s.tlsConfig.ServerName = cfg.ServerName
		}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, sdk.Invalid("ca_file", "%v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, sdk.Invalid("ca_file", "%s holds no PEM certificate", cfg.CAFile)
			}
			s.tlsConfig.RootCAs = pool
		}
	} else if cfg.CAFile != "" || cfg.ServerName != "" || cfg.InsecureSkipVerify {
		return nil, sdk.Invalid("tls", "is none, so ca_file, server_name and insecure_skip_verify mean nothing")
	}
	if cfg.Username != "" || cfg.Password != "" {
		if cfg.Username == "" {
			return nil, sdk.Invalid("username", "is required with a password")
		}
		if s.tls == tlsNone && !isLoopback(host) {
			return nil, sdk.Invalid("tls", "is none: PLAIN credentials are sent only over TLS or to a loopback server")
		}
		s.auth = smtp.PlainAuth("", cfg.Username, cfg.Password, host)
	}
	s.helo = cfg.Helo
	if s.helo == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			s.helo = h
		} else {
			s.helo = "localhost"
		}
	}
	if strings.ContainsAny(s.helo, " \r\n") {
		return nil, sdk.Invalid("helo", "%q is not a host name", s.helo)
	}
	if cfg.From == "" {
		return nil, sdk.Invalid("from", "is required")
	}
	if s.from, err = mail.ParseAddress(cfg.From); err != nil {
		return nil, sdk.Invalid("from", "%q is not a mail address: %v", cfg.From, err)
	}
	if s.to, err = parseAddrs("to", cfg.To); err != nil {
		return nil, err
	}
	if cfg.Subject == "" {
		cfg.Subject = defaultSubject
	}
	if cfg.Body == "" {
		cfg.Body = defaultBody
	}
	if s.subject, err = parseTemplate("subject", cfg.Subject); err != nil {
		return nil, err
	}
	if s.body, err = parseTemplate("body", cfg.Body); err != nil {
		return nil, err
	}
	if s.timeout < 0 {
		return nil, sdk.Invalid("timeout", "must not be negative")
	}
	if s.timeout == 0 {
		s.timeout = defaultTimeout
	}
	return s, nil
}

func (a *smtpAction) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	s, err := validate(cfg)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.cfg = s
	a.mu.Unlock()
	return nil
}

func (*smtpAction) Probe(context.Context) (bool, string) { return true, "" }

// message is one rendered mail.
type message struct {
	to      []*mail.Address
	subject string
	body    string // rendered, before encoding
	data    []byte
}

// render applies the params and templates to the payload.
func render(s *settings, req sdk.ActionRequest) (*message, error) {
	var p Params
	if err := sdk.Decode(req.Params, &p); err != nil {
		return nil, err
	}
	m := &message{to: s.to}
	var err error
	if len(p.To) > 0 {
		if m.to, err = parseAddrs("to", p.To); err != nil {
			return nil, err
		}
	}
	subjectT, bodyT := s.subject, s.body
	if p.Subject != "" {
		if subjectT, err = parseTemplate("subject", p.Subject); err != nil {
			return nil, err
		}
	}
	if p.Body != "" {
		if bodyT, err = parseTemplate("body", p.Body); err != nil {
			return nil, err
		}
	}
	var data any
	if len(bytes.TrimSpace(req.Payload)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(req.Payload))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, fmt.Errorf("the event payload is not JSON: %w", err)
		}
	}
	var subj, body bytes.Buffer
	if err := subjectT.Execute(&subj, data); err != nil {
		return nil, fmt.Errorf("rendering the subject: %w", err)
	}
	if err := bodyT.Execute(&body, data); err != nil {
		return nil, fmt.Errorf("rendering the body: %w", err)
	}
	// One line: a newline in a header would let the event write headers.
	m.subject = strings.Join(strings.Fields(subj.String()), " ")

	var b bytes.Buffer
	hdr := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	hdr("From", s.from.String())
	to := make([]string, len(m.to))
	for i, a := range m.to {
		to[i] = a.String()
	}
	hdr("To", strings.Join(to, ", "))
	hdr("Subject", mime.QEncoding.Encode("utf-8", m.subject))
	hdr("Date", time.Now().Format(time.RFC1123Z))
	hdr("Message-ID", messageID(req.Key, s.from.Address))
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", "text/plain; charset=utf-8")
	hdr("Content-Transfer-Encoding", "quoted-printable")
	hdr("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	text := strings.ReplaceAll(body.String(), "\r\n", "\n")
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	m.body = text
	_, _ = qp.Write([]byte(strings.ReplaceAll(text, "\n", "\r\n")))
	_ = qp.Close()
	m.data = b.Bytes()
	return m, nil
}

// messageID is stable per idempotency key.
func messageID(key, from string) string {
	domain := "unyo.invalid"
	if i := strings.LastIndexByte(from, '@'); i >= 0 && i+1 < len(from) {
		domain = from[i+1:]
	}
	sum := sha256.Sum256([]byte(key))
	return "<unyo." + hex.EncodeToString(sum[:16]) + "@" + domain + ">"
}

func (a *smtpAction) Execute(ctx context.Context, req sdk.ActionRequest, progress func(string)) sdk.Outcome {
	a.mu.Lock()
	s := a.cfg
	a.mu.Unlock()
	if s == nil {
		return sdk.Outcome{Status: sdk.Failed, Message: "not configured"}
	}
	m, err := render(s, req)
	if err != nil {
		return sdk.Outcome{Status: sdk.Failed, Message: err.Error()}
	}
	rcpts := make([]string, len(m.to))
	for i, t := range m.to {
		rcpts[i] = t.Address
	}
	if req.DryRun {
		msg := fmt.Sprintf("dry run: would send %d bytes from %s to %s via %s (tls %s)\nSubject: %s",
			len(m.data), s.from.Address, strings.Join(rcpts, ", "), s.server, s.tls, m.subject)
		msg += "\n\n" + m.body
		if len(msg) > maxDryRun {
			msg = strings.ToValidUTF8(msg[:maxDryRun], "")
		}
		return sdk.Outcome{Status: sdk.Succeeded, Message: msg}
	}
	err = send(ctx, s, rcpts, m.data, progress)
	switch {
	case err == nil:
		return sdk.Outcome{Status: sdk.Succeeded, Message: fmt.Sprintf("sent %q to %s via %s", m.subject, strings.Join(rcpts, ", "), s.server)}
	case ctx.Err() != nil:
		return sdk.Outcome{Status: sdk.Cancelled, Message: err.Error()} // the SDK says cancelled or timed out
	case retryable(err):
		return sdk.Outcome{Status: sdk.Retryable, Message: err.Error(), RetryAfter: retryAfter}
	}
	return sdk.Outcome{Status: sdk.Failed, Message: err.Error()}
}

// permanent marks errors retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retryable: 4xx replies and connection trouble; not 5xx replies,
// certificates that do not verify or missing server features.
func retryable(err error) bool {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code >= 400 && te.Code < 500
	}
	var p permanent
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &p), errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &he),
		errors.As(err, &ci), errors.As(err, &rh):
		return false
	}
	return true
}

// step names the SMTP step an error came from.
func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// send runs one SMTP session; ctx ending closes the connection.
func send(ctx context.Context, s *settings, rcpts []string, data []byte, progress func(string)) error {
	// The session timeout is the connection's deadline; ctx (the action's
	// timeout, Cancel) ending closes the connection, so that the SDK sees
	// ctx ended rather than an I/O timeout racing it.
	deadline := time.Now().Add(s.timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	d := &net.Dialer{}
	var conn net.Conn
	var err error
	if s.tls == tlsImplicit {
		conn, err = (&tls.Dialer{NetDialer: d, Config: s.tlsConfig}).DialContext(dctx, "tcp", s.server)
	} else {
		conn, err = d.DialContext(dctx, "tcp", s.server)
	}
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", s.server, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fmt.Errorf("%s greeting: %w", s.server, err)
	}
	defer c.Close()
	if err := c.Hello(s.helo); err != nil {
		return step("EHLO", err)
	}
	if s.tls == tlsStartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return permanent{fmt.Errorf("%s does not offer STARTTLS (set tls to none to send in the clear)", s.server)}
		}
		if err := c.StartTLS(s.tlsConfig); err != nil {
			return step("STARTTLS", err)
		}
	}
	if s.auth != nil {
		if ok, _ := c.Extension("AUTH"); !ok {
			return permanent{fmt.Errorf("%s does not offer AUTH", s.server)}
		}
		if err := c.Auth(s.auth); err != nil {
			return step("AUTH", err)
		}
	}
	progress("connected to " + s.server)
	if err := c.Mail(s.from.Address); err != nil {
		return step("MAIL FROM", err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			_ = c.Reset()
			return step("RCPT TO <"+r+">", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return step("DATA", err)
	}
	if _, err := w.Write(data); err != nil {
		return step("DATA", err)
	}
	if err := w.Close(); err != nil {
		return step("end of DATA", err)
	}
	progress("accepted by " + s.server)
	_ = c.Quit() // the message is accepted; a failed QUIT changes nothing
	return nil
}

func main() { sdk.Serve(&smtpAction{}) }

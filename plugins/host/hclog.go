package host

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// slogLogger adapts hclog, which go-plugin speaks, to the host's slog. The
// plugin's JSON log lines arrive here already parsed, with their level.
type slogLogger struct {
	l     *slog.Logger
	name  string
	args  []any
	level hclog.Level
}

func newSlogLogger(l *slog.Logger) hclog.Logger { return &slogLogger{l: l, level: hclog.Trace} }

func toSlogLevel(lv hclog.Level) slog.Level {
	switch lv {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < s.level {
		return
	}
	all := append(append([]any{}, s.args...), args...)
	if s.name != "" {
		all = append(all, "logger", s.name)
	}
	s.l.Log(context.Background(), toSlogLevel(level), msg, all...)
}

func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }
func (s *slogLogger) IsTrace() bool                 { return s.enabled(hclog.Trace) }
func (s *slogLogger) IsDebug() bool                 { return s.enabled(hclog.Debug) }
func (s *slogLogger) IsInfo() bool                  { return s.enabled(hclog.Info) }
func (s *slogLogger) IsWarn() bool                  { return s.enabled(hclog.Warn) }
func (s *slogLogger) IsError() bool                 { return s.enabled(hclog.Error) }
func (s *slogLogger) ImpliedArgs() []any            { return s.args }
func (s *slogLogger) Name() string                  { return s.name }
func (s *slogLogger) SetLevel(l hclog.Level)        { s.level = l }
func (s *slogLogger) GetLevel() hclog.Level         { return s.level }

func (s *slogLogger) enabled(l hclog.Level) bool {
	return l >= s.level && s.l.Enabled(context.Background(), toSlogLevel(l))
}

func (s *slogLogger) With(args ...any) hclog.Logger {
	c := *s
	c.args = append(append([]any{}, s.args...), args...)
	return &c
}

func (s *slogLogger) Named(name string) hclog.Logger {
	c := *s
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	c := *s
	c.name = name
	return &c
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &lineWriter{emit: func(line string) { s.Info(line) }}
}

// lineWriter turns a byte stream (a plugin's stray stdout/stderr writes)
// into one log record per line.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := string(w.buf.Next(i + 1))
		w.emit(line[:len(line)-1])
	}
	if w.buf.Len() > 64<<10 { // a plugin writing without newlines
		w.emit(w.buf.String())
		w.buf.Reset()
	}
	return len(p), nil
}

// StderrTail keeps the last bytes a process wrote to stderr, so that the
// host (and the conformance harness) can say why it died: a Go panic or a fatal error is printed there,
// outside the plugin's structured logger.
type StderrTail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (w *StderrTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > tailSize {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-tailSize:]...)
	}
	return len(p), nil
}

// Last is the line that best says why the process ended: the first line
// of a Go panic or fatal error, else the last line that is not a JSON log
// record (those were relayed already); "" when there is none.
func (w *StderrTail) Last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(string(w.buf), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return strings.TrimSpace(l)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "{") {
			return l
		}
	}
	return ""
}

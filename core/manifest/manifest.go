// Package manifest turns operators' YAML documents into API objects and back:
// the files of `unyo apply|get|delete -f` and the checks an agent defines in
// its own config.
//
// A document names a kind and carries the fields of that kind's message:
//
//	kind: Check
//	name: disk
//	cluster: dc1            # optional
//	labels: {team: infra}   # optional
//	spec:
//	  command: [check_disk, -w, "20%", -c, "10%", -p, /]
//	  interval: 1m
//
// The spec is checked against the protobuf descriptor before protojson
// converts it, so that every problem is reported with its file, document,
// line and field path rather than as a JSON byte offset. Values are checked
// for their type only; what a value means (is "1m" a valid interval?) is
// validated by whoever uses the object.
package manifest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

// APIVersion is the only apiVersion a document may declare; it is optional.
const APIVersion = "unyo/v1"

// Decode reads a multi-document YAML stream. source names it in errors
// (usually the file name). Empty documents are skipped. All problems of the
// stream are returned together as an ErrorList, and then no objects are: a
// file is applied whole or not at all.
func Decode(r io.Reader, source string) ([]*unyov1.Object, error) {
	if source == "" {
		source = "input"
	}
	data, err := readLimited(r, source)
	if err != nil {
		return nil, err
	}
	var (
		objs  []*unyov1.Object
		errs  ErrorList
		seen  = map[string]int{} // kind/cluster/name -> first document
		docNo int
		reg   = builtin.Kinds()
	)
	for _, ch := range splitDocuments(data) {
		if len(ch.text) > MaxDocumentSize {
			docNo++
			errs = append(errs, &Error{Source: source, Document: docNo, Line: ch.line,
				Msg: fmt.Sprintf("%d bytes, more than %d MiB, the largest document read; split it", len(ch.text), MaxDocumentSize>>20)})
			continue
		}
		// Each chunk is parsed on its own so that a syntax error in one
		// document does not hide the problems of the following ones.
		dec := yaml.NewDecoder(bytes.NewReader(ch.text))
		for {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			docNo++
			if err != nil {
				errs = append(errs, syntaxError(err, ch.text, source, docNo, ch.line))
				break
			}
			if len(doc.Content) == 0 || isNull(deref(doc.Content[0])) {
				continue
			}
			d := &docDecoder{source: source, doc: docNo, offset: ch.line - 1, kinds: reg}
			o := d.object(doc.Content[0], "")
			// The walk reports some problems late ("name: required",
			// merged keys); operators read a file top to bottom.
			slices.SortStableFunc(d.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
			errs = append(errs, d.errs...)
			if o == nil {
				continue
			}
			key := kinds.KindOf(o) + "/" + kinds.Cluster(o) + "/" + kinds.Name(o)
			if first, dup := seen[key]; dup {
				d.errs = nil
				d.errorf(doc.Content[0], "", "defined again (first in document %d)", first)
				errs = append(errs, d.errs...)
				continue
			}
			seen[key] = docNo
			objs = append(objs, o)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return objs, nil
}

// DecodeFile decodes the file at path; errors name the file as given.
func DecodeFile(path string) ([]*unyov1.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(f, path)
}

// DecodeDocument decodes one document that was already parsed into a map,
// e.g. an entry of an agent's config. where names it in errors
// ("agent.yaml: checks[2]"); there are no line numbers.
func DecodeDocument(m map[string]any, where string) (*unyov1.Object, error) {
	return decodeMap(m, where, "")
}

// DecodeCheck is DecodeDocument for places that hold only checks: kind may
// be omitted, and must be Check if given.
func DecodeCheck(m map[string]any, where string) (*unyov1.Check, error) {
	o, err := decodeMap(m, where, "Check")
	if err != nil {
		return nil, err
	}
	return o.GetCheck(), nil
}

func decodeMap(m map[string]any, where, implied string) (*unyov1.Object, error) {
	d := &docDecoder{source: where, kinds: builtin.Kinds()}
	if len(m) == 0 {
		d.errorf(nil, "", "empty document")
		return nil, d.errs.err()
	}
	// Going through a yaml.Node lets config-embedded documents share every
	// check with files; the node has no positions, so errors have no lines.
	var n yaml.Node
	if err := n.Encode(m); err != nil {
		d.errorf(nil, "", "%v", err)
		return nil, d.errs.err()
	}
	o := d.object(&n, implied)
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	return o, nil
}

// chunk is a piece of a stream holding one document (or, after an explicit
// "..." end marker, several), and the line it starts on.
type chunk struct {
	text []byte
	line int
}

// splitDocuments cuts a stream at "---" lines. YAML forbids a document
// marker at column 0 inside any scalar, so the cut is where the parser would
// start a new document too. Comments and directives before the first marker
// stay with the document they precede.
func splitDocuments(data []byte) []chunk {
	var chunks []chunk
	start, startLine := 0, 1
	line := 1
	for off := 0; off < len(data); line++ {
		next := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			next = off + i + 1
		}
		l := bytes.TrimRight(data[off:next], "\r\n")
		if isDocumentStart(l) && off > start && !preambleOnly(data[start:off]) {
			chunks = append(chunks, chunk{text: data[start:off], line: startLine})
			start, startLine = off, line
		}
		off = next
	}
	return append(chunks, chunk{text: data[start:], line: startLine})
}

func isDocumentStart(l []byte) bool {
	return bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t')
}

func preambleOnly(b []byte) bool {
	for l := range bytes.Lines(b) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' && l[0] != '%' {
			return false
		}
	}
	return true
}

var yamlErrorLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError rewords a yaml.v3 parse error with the line in the whole file.
func syntaxError(err error, text []byte, source string, doc, chunkLine int) *Error {
	e := &Error{Source: source, Document: doc, Line: chunkLine}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		msg = m[2]
		// yaml.v3 reports scanner errors with 1-based lines but parser
		// errors with the 0-based line of the enclosing construct, which
		// may be far above the mistake: look for the mistake instead.
		if isParserProblem(msg) {
			n++
			if l := firstFailingLine(text, msg); l > 0 {
				n = l
			}
		}
		e.Line = chunkLine - 1 + n
	}
	e.Msg = "invalid YAML: " + msg
	return e
}

// firstFailingLine returns the number of lines of the shortest prefix of
// text that fails to parse with the same problem, or 0. That is the line
// the parser was on when it gave up: a prefix cut inside a construct that
// is closed later fails with a different problem.
func firstFailingLine(text []byte, msg string) int {
	end := 0
	for n := 1; end < len(text); n++ {
		if i := bytes.IndexByte(text[end:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(text)
		}
		dec := yaml.NewDecoder(bytes.NewReader(text[:end]))
		for {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if err == nil {
				continue
			}
			if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil && m[2] == msg {
				return n
			}
			break
		}
	}
	return 0
}

func isParserProblem(msg string) bool {
	return strings.HasPrefix(msg, "did not find expected ") || slices.Contains([]string{
		"found duplicate %TAG directive",
		"found duplicate %YAML directive",
		"found incompatible YAML document",
		"found undefined tag handle",
	}, msg)
}

// protoError strips protojson's prefix and JSON position, which mean
// nothing to someone reading YAML.
func protoError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "proto:")
	msg = strings.TrimSpace(msg)
	if strings.HasPrefix(msg, "(line ") {
		if i := strings.Index(msg, "):"); i >= 0 {
			msg = strings.TrimSpace(msg[i+2:])
		}
	}
	return msg
}

package manifest

import (
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// Bounds on what one manifest may cost to decode. YAML aliases let a small
// file stand for a huge value ("billion laughs"): the walk that expands them
// counts what it expands and stops at these limits, so that a hostile or
// broken file costs megabytes, not gigabytes.
const (
	// MaxFileSize is the largest manifest stream Decode reads.
	MaxFileSize = 64 << 20
	// MaxDocumentSize is the largest single document, as written.
	MaxDocumentSize = 4 << 20
	// MaxDocumentValues is the most values (mapping entries, list
	// elements, scalars) one document may expand to, aliases included.
	MaxDocumentValues = 200_000
	// MaxDocumentBytes is the most scalar text one document may expand to,
	// aliases included.
	MaxDocumentBytes = 16 << 20
)

// readLimited reads all of r, refusing more than MaxFileSize bytes.
func readLimited(r io.Reader, source string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d MiB, the most one apply reads; split it into several files", source, MaxFileSize>>20)
	}
	return data, nil
}

// budget counts what a document's walk expanded.
type budget struct {
	values, bytes int
	exceeded      bool
}

// spend accounts for visiting n and reports whether the walk may go on. The
// first time a limit is passed it is reported, once for the document.
func (d *docDecoder) spend(n *yaml.Node) bool {
	b := &d.budget
	if b.exceeded {
		return false
	}
	b.values++
	if n != nil {
		b.bytes += len(n.Value)
	}
	if b.values <= MaxDocumentValues && b.bytes <= MaxDocumentBytes {
		return true
	}
	b.exceeded = true
	d.errs = append(d.errs, &Error{
		Source: d.source, Document: d.doc, Object: d.label,
		Msg: fmt.Sprintf("expands to more than %d values or %d MiB of text (the limit per document; aliases count each time they are used): write the values out, or use fewer aliases",
			MaxDocumentValues, MaxDocumentBytes>>20),
	})
	return false
}

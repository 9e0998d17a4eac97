package root

import (
	"fmt"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/limits"
	"github.com/unyo-ops/unyo/core/manifest"
)

// invalid wraps the first failed check as InvalidArgument, so that root
// refuses a malformed request before fanning it out to every cluster.
func invalid(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
	}
	return nil
}

// validRef checks an object reference: its kind is known and it names an
// object.
func validRef(field string, ref *unyov1.ObjectRef) error {
	if err := validKind(field+".kind", ref.GetKind()); err != nil {
		return err
	}
	return limits.Required(field+".name", ref.GetName())
}

func validKind(field, kind string) error {
	if err := limits.Required(field, kind); err != nil {
		return err
	}
	if _, err := manifest.ParseKind(kind); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

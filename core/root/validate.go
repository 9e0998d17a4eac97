package root

import (
	"fmt"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/limits"
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

// kindOf checks a kind as a request names it and resolves it.
func kindOf(reg *kinds.Registry, field, kind string) (kinds.Kind, error) {
	if err := limits.Required(field, kind); err != nil {
		return kinds.Kind{}, err
	}
	k, err := reg.Parse(kind)
	if err != nil {
		return kinds.Kind{}, fmt.Errorf("%s: %w", field, err)
	}
	return k, nil
}

// refKind checks an object reference: its kind is known and it names an
// object.
func refKind(reg *kinds.Registry, field string, ref *unyov1.ObjectRef) (kinds.Kind, error) {
	k, err := kindOf(reg, field+".kind", ref.GetKind())
	if err != nil {
		return kinds.Kind{}, err
	}
	return k, limits.Required(field+".name", ref.GetName())
}

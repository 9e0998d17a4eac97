// Package procenv builds the environment of the processes unyo starts:
// checks, check and action plugins, and the commands those run. They do
// not inherit unyo's environment, which holds its own settings (UNYO_*,
// tokens among them) and whatever else the service manager put there: they
// get a small fixed base and the variables the operator declared by name,
// never a UNYO_* variable of unyo's environment. (What unyo sets for a
// child itself, such as the plugin handshake's UNYO_PLUGIN_* or an action's
// UNYO_IDEMPOTENCY_KEY, is added by the caller.)
package procenv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/unyo-ops/unyo/core/api/validate"
)

// Prefix is what unyo's own settings are named with (UNYO_AGENT_TOKEN, ...).
// No such variable is ever passed on, even when declared.
const Prefix = "UNYO_"

// isBase reports whether name is one of the variables every child gets
// when unyo has them: what programs need to find other programs, format
// text and dates, and write temporary files. None of them is a secret.
func isBase(name string) bool {
	switch name {
	case "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// Inherit returns the entries of environ ("NAME=value", as os.Environ
// returns them) that a child may see: the base variables and those named in
// pass, minus every UNYO_* variable. Order follows environ.
func Inherit(environ, pass []string) []string {
	env := make([]string, 0, 8+len(pass))
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || IsUnyo(name) {
			continue
		}
		if isBase(name) || slices.Contains(pass, name) {
			env = append(env, kv)
		}
	}
	return env
}

// WithoutUnyo returns environ minus every UNYO_* variable and go-plugin's
// PLUGIN_* handshake variables: for a plugin passing its own (already
// reduced) environment on to a command it runs.
func WithoutUnyo(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return IsUnyo(name) || strings.HasPrefix(name, "PLUGIN_")
	})
}

// IsUnyo reports whether name is one of unyo's own variables. Environment
// names are case-sensitive, but a lower-case unyo_agent_token is refused
// too: it is someone's mistake for the real one.
func IsUnyo(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), Prefix)
}

// CheckName says what is wrong with a name declared for passing on, or
// returns nil.
func CheckName(name string) error {
	switch err := validate.EnvName(name); {
	case name == "" && err != nil:
		return err
	case err != nil:
		return fmt.Errorf("%q: %w", name, err)
	case IsUnyo(name):
		return fmt.Errorf("%s: unyo's own settings (%s*) hold its tokens and are never passed to checks or plugins; give a check the value it needs in its spec.env instead", name, Prefix)
	}
	return nil
}

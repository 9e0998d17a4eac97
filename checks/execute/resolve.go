package execute

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Errors a Result or Resolve may wrap; test with errors.Is.
var (
	ErrNotFound      = errors.New("command not found")
	ErrNotExecutable = errors.New("command not executable")
	ErrTimedOut      = errors.New("timed out")
)

// DefaultDirs returns where distributions install Nagios-compatible
// plugins: Debian and Ubuntu (both package names) and RHEL's lib64.
func DefaultDirs() []string {
	return []string{"/usr/lib/nagios/plugins", "/usr/lib/monitoring-plugins", "/usr/lib64/nagios/plugins"}
}

// Resolve finds the program to run for a check's first word. A name with a
// slash is a path and is only checked. A bare name is looked up in dirs, in
// order, and then in $PATH, so a plugin directory wins over a same-named
// system tool. Errors wrap ErrNotFound or ErrNotExecutable.
func Resolve(name string, dirs []string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: the command is empty", ErrNotFound)
	}
	if strings.Contains(name, "/") {
		if err := checkExecutable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	var notExec error
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		// Keep looking, but if nothing better turns up, a plugin that is
		// installed without its execute bit is the more useful error.
		if notExec == nil && !errors.Is(err, ErrNotFound) {
			notExec = err
		}
	}
	// LookPath refuses results relative to the working directory (ErrDot),
	// which is what an agent wants too.
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if notExec != nil {
		return "", notExec
	}
	where := "$PATH"
	if len(dirs) > 0 {
		where = strings.Join(dirs, ", ") + " or $PATH"
	}
	return "", fmt.Errorf("%w: %q is not in %s", ErrNotFound, name, where)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist", ErrNotFound, path)
	case err != nil:
		return fmt.Errorf("cannot use command %s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("%w: %s is a directory", ErrNotExecutable, path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%w: %s has mode %s; add the execute bit (chmod +x)", ErrNotExecutable, path, fi.Mode())
	}
	return nil
}

// Environ returns base with extra added: Command.Env from what the agent
// passes on of its environment (procenv.Inherit) and a check's spec.env. An extra variable
// replaces a base one of the same name; extra is added in sorted order so
// the result is stable.
func Environ(base []string, extra map[string]string) []string {
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[name]; !ok {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// readEnv takes the UNYO_* variables that name keys from env ("NAME=value"
// entries, as os.Environ returns them). Empty and unknown variables are
// ignored (see the package documentation for why).
func readEnv(env []string, root *field) (map[string]setting, []Problem) {
	vars := map[string]string{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if _, seen := vars[name]; !seen { // the first wins, as with os.Getenv
			vars[name] = value
		}
	}
	values := map[string]setting{}
	var problems []Problem
	for _, f := range root.leaves() { // schema order keeps the report stable
		name := envName(f.key)
		text := vars[name]
		if text == "" {
			continue
		}
		from := origin{env: name}
		v, err := parseText(f, text)
		if err != nil {
			problems = append(problems, from.problem(f.key, err.Error()))
			continue
		}
		values[f.key] = setting{value: v, from: from}
	}
	return values, problems
}

// readFlags takes the flags that were set and name keys: by their
// FlagKeyAnnotation, or by convention (--server.listen, --server-listen).
// Other flags belong to the command and are left alone.
func readFlags(fs *pflag.FlagSet, root *field) (map[string]setting, []Problem) {
	values := map[string]setting{}
	if fs == nil {
		return values, nil
	}
	var problems []Problem
	byKey, byName := map[string]*field{}, map[string]*field{}
	for _, f := range root.leaves() {
		byKey[f.key] = f
		byName[f.key] = f
		byName[flagName(f.key)] = f
	}
	fs.Visit(func(fl *pflag.Flag) { // only flags that were set
		from := origin{flag: fl.Name}
		f := byName[fl.Name]
		if keys := fl.Annotations[FlagKeyAnnotation]; len(keys) > 0 {
			if f = byKey[keys[0]]; f == nil {
				// A mistake in the command's code, but worth a clear message.
				problems = append(problems, from.problem(keys[0], fmt.Sprintf("sets %q, which is not a configuration key", keys[0])))
				return
			}
		}
		if f == nil {
			return
		}
		var v any
		var err error
		switch sv, isSlice := fl.Value.(pflag.SliceValue); {
		case f.kind == kindStrings && isSlice:
			v = cleanList(sv.GetSlice())
		case f.kind == kindStringMap && fl.Value.Type() == "stringToString":
			v, err = fs.GetStringToString(fl.Name)
		default:
			v, err = parseText(f, fl.Value.String())
		}
		if err != nil {
			problems = append(problems, from.problem(f.key, err.Error()))
			return
		}
		values[f.key] = setting{value: v, from: from}
	})
	return values, problems
}

// parseText reads a key's value from text: an environment variable, a flag,
// or a YAML scalar of a duration or size.
func parseText(f *field, text string) (any, error) {
	switch f.kind {
	case kindString:
		return text, nil
	case kindInt:
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("invalid integer %q", text)
		}
		return n, nil
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("invalid value %q (expected true or false)", text)
		}
		return b, nil
	case kindDuration:
		return parseDuration(text)
	case kindSize:
		return ParseSize(text)
	case kindStrings:
		return cleanList(strings.Split(text, ",")), nil
	case kindStringMap:
		return parsePairs(text)
	case kindChecks:
		return nil, errors.New("checks can only be set in the configuration file")
	case kindLogFiles:
		return nil, errors.New("log files can only be set in the configuration file")
	case kindPlugins:
		return nil, errors.New("plugins can only be enabled in the configuration file")
	}
	return nil, fmt.Errorf("%s cannot be set here", f.key)
}

// parseDuration accepts Go durations ("10s", "1m30s") and whole days
// ("14d", for retentions). A bare number is refused rather than guessed at:
// 30 could mean seconds or nanoseconds.
func parseDuration(text string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(strings.TrimSpace(text), "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 100*365 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(strings.TrimSpace(text))
	switch {
	case err != nil:
		if _, numErr := strconv.ParseFloat(strings.TrimSpace(text), 64); numErr == nil {
			return 0, fmt.Errorf("invalid duration %q (a unit is required, e.g. %ss)", text, strings.TrimSpace(text))
		}
		return 0, fmt.Errorf("invalid duration %q (expected a duration such as 10s, 1m30s or 1h)", text)
	case d < 0:
		return 0, fmt.Errorf("invalid duration %q (must not be negative)", text)
	}
	return d, nil
}

// parsePairs reads "name=value,name2=value2".
func parsePairs(text string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range cleanList(strings.Split(text, ",")) {
		name, value, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("invalid labels %q (expected name=value pairs separated by commas)", text)
		}
		m[name] = strings.TrimSpace(value)
	}
	return m, nil
}

// cleanList trims the items of a list and drops empty ones, so "a, b," is
// [a b].
func cleanList(items []string) []string {
	out := []string{}
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

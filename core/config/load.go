package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// LoadOptions says where Load finds the configuration.
type LoadOptions struct {
	// File is the YAML configuration file; empty means none (defaults,
	// environment and flags only).
	File string
	// Role is the role the command runs as: RoleDev, RoleRoot, RoleCluster
	// or RoleAgent; RoleServer for "root or cluster, as configured"; or ""
	// for "as configured". If the configuration states a role, it must
	// agree.
	Role string
	// Env holds "NAME=value" entries; nil means os.Environ(). Tests pass
	// their own (an empty, non-nil slice for none).
	Env []string
	// Flags is the command's flag set; flags that were set override their
	// keys (see BindFlags, and the package documentation for how flags name
	// keys).
	Flags *pflag.FlagSet
}

// Load reads, merges and checks the configuration. On any problem it
// returns an *Error listing them all; other errors (an unreadable file, a
// bad LoadOptions.Role) are returned as they are.
func Load(opts LoadOptions) (*Config, error) {
	if !slices.Contains([]string{"", RoleDev, RoleRoot, RoleCluster, RoleAgent, RoleServer}, opts.Role) {
		return nil, fmt.Errorf("config: LoadOptions.Role %q is not a role", opts.Role)
	}
	root := schema()
	var problems []Problem
	var file map[string]setting
	if opts.File != "" {
		data, err := os.ReadFile(opts.File)
		if err != nil {
			return nil, fmt.Errorf("reading configuration: %w", err)
		}
		var ps []Problem
		file, ps = readFile(opts.File, data, root)
		problems = append(problems, ps...)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	fromEnv, ps := readEnv(env, root)
	problems = append(problems, ps...)
	fromFlags, ps := readFlags(opts.Flags, root)
	problems = append(problems, ps...)

	layers := []map[string]setting{file, fromEnv, fromFlags} // lowest first
	effective := map[string]setting{}
	for _, layer := range layers {
		for key, s := range layer {
			effective[key] = s
		}
	}

	// A file that could not be read may well state the role: do not also
	// complain that none is stated.
	fileUnreadable := opts.File != "" && file == nil
	role, ps := resolveRole(opts.Role, layers, opts.File, fileUnreadable)
	problems = append(problems, ps...)
	cfg, err := merge(role, root, file, fromEnv, fromFlags)
	if err != nil {
		return nil, err
	}
	cfg.Role = role
	cfg.File = opts.File
	cfg.fillDerived()

	// The rules across keys are checked only once the role is known (they
	// depend on it) and the file could be read, and not for keys that
	// already have a problem: a type error in server.tls.key_file should not
	// also read as "key_file missing".
	if role != "" && !fileUnreadable {
		for _, p := range cfg.problems() {
			if slices.ContainsFunc(problems, func(q Problem) bool { return relatedKeys(p.Key, q.Key) }) {
				continue
			}
			from := origin{file: opts.File}
			if s, ok := effective[p.Key]; ok {
				from = s.from
			}
			problems = append(problems, from.problem(p.Key, p.Msg))
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return cfg, nil
}

// resolveRole decides the role: the command's, or else the one stated
// highest (flag over environment over file). Every statement must agree
// with it: the role changes what the whole configuration means, so a
// disagreement is a mistake rather than an override. It returns "" with
// problems when that fails, and "" without any when only the unreadable file
// could have decided.
func resolveRole(command string, layers []map[string]setting, file string, fileUnreadable bool) (string, []Problem) {
	var statements []setting // lowest first
	var problems []Problem
	for _, layer := range layers {
		s, ok := layer["role"]
		if !ok {
			continue
		}
		if role := s.value.(string); !slices.Contains([]string{RoleDev, RoleRoot, RoleCluster, RoleAgent}, role) {
			problems = append(problems, s.from.problem("role", fmt.Sprintf("invalid role %q (expected dev, root, cluster or agent)", role)))
			continue
		}
		statements = append(statements, s)
	}
	if len(problems) > 0 {
		return "", problems
	}

	decided, decidedBy := command, "the command"
	if command == "" || command == RoleServer {
		missing := origin{file: file}
		switch {
		case len(statements) == 0 && fileUnreadable:
			return "", nil
		case len(statements) == 0 && command == RoleServer:
			return "", []Problem{missing.problem("role", "required for unyo server (set role to root or cluster)")}
		case len(statements) == 0:
			return "", []Problem{missing.problem("role", "required (expected dev, root, cluster or agent)")}
		}
		top := statements[len(statements)-1]
		decided, decidedBy = top.value.(string), top.from.String()
		if command == RoleServer && decided != RoleRoot && decided != RoleCluster {
			return "", []Problem{top.from.problem("role", fmt.Sprintf("%q is not a server role (expected root or cluster for unyo server)", decided))}
		}
	}
	for _, s := range statements {
		role := s.value.(string)
		switch {
		case role == decided:
			continue
		case command != "" && command != RoleServer:
			problems = append(problems, s.from.problem("role", fmt.Sprintf("%q conflicts with the command, which runs as %q (remove role from the configuration or run the matching command)", role, command)))
		default:
			problems = append(problems, s.from.problem("role", fmt.Sprintf("%q conflicts with %q set by %s", role, decided, decidedBy)))
		}
	}
	if len(problems) > 0 {
		return "", problems
	}
	return decided, nil
}

// merge layers defaults, file, environment and flags with viper and decodes
// the result. The layers hold checked, typed values, so decoding cannot
// fail on a user's input; an error here is a bug.
func merge(role string, root *field, file, env, flags map[string]setting) (*Config, error) {
	v := viper.New()
	defaults := reflect.ValueOf(staticDefaults(role)).Elem()
	for _, f := range root.leaves() {
		if f.viaViper() {
			v.SetDefault(f.key, defaults.FieldByIndex(f.index).Interface())
		}
	}
	if err := v.MergeConfigMap(nest(root, file)); err != nil {
		return nil, fmt.Errorf("config: merging the file: %w", err)
	}
	if err := v.MergeConfigMap(nest(root, env)); err != nil {
		return nil, fmt.Errorf("config: merging the environment: %w", err)
	}
	// Flags are the top layer, which in viper is Set.
	for _, f := range root.leaves() {
		if s, ok := flags[f.key]; ok && f.viaViper() {
			v.Set(f.key, s.value)
		}
	}

	var cfg Config
	err := v.Unmarshal(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.TextUnmarshallerHookFunc(),
			mapstructure.StringToTimeDurationHookFunc(),
		)
		dc.ErrorUnused = true // a key viper has but Config lacks is a bug
	})
	if err != nil {
		return nil, fmt.Errorf("config: decoding merged settings: %w", err)
	}

	// Maps bypass viper (see viaViper): take the highest layer that has one.
	out := reflect.ValueOf(&cfg).Elem()
	for _, f := range root.leaves() {
		if f.viaViper() {
			continue
		}
		value := defaults.FieldByIndex(f.index)
		for _, layer := range []map[string]setting{file, env, flags} {
			if s, ok := layer[f.key]; ok {
				value = reflect.ValueOf(s.value)
			}
		}
		out.FieldByIndex(f.index).Set(value)
	}
	return &cfg, nil
}

// nest turns {"server.listen": x} into {"server": {"listen": x}} for viper,
// leaving out what viper must not carry.
func nest(root *field, settings map[string]setting) map[string]any {
	out := map[string]any{}
	for _, f := range root.leaves() {
		s, ok := settings[f.key]
		if !ok || !f.viaViper() {
			continue
		}
		names := strings.Split(f.key, ".")
		m := out
		for _, name := range names[:len(names)-1] {
			next, ok := m[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[name] = next
			}
			m = next
		}
		m[names[len(names)-1]] = s.value
	}
	return out
}

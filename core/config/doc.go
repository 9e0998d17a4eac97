// Package config loads and checks unyo's configuration.
//
// One binary runs every role (`unyo server` as root or cluster, `unyo agent`,
// `unyo dev`), and all of them read the same schema, Config. Values come from
// four layers; a higher layer overrides a lower one key by key:
//
//  1. command-line flags the command binds (only flags that were set)
//  2. environment variables UNYO_<KEY>
//  3. the YAML configuration file
//  4. the defaults for the role (see Defaults)
//
// # Environment
//
// Every key of the schema has a variable: UNYO_ followed by the dotted key in
// upper case with dots written as underscores, e.g. UNYO_SERVER_LISTEN for
// server.listen, UNYO_STORE_DSN for store.dsn, UNYO_AGENT_MAX_OUTPUT for
// agent.max_output. Lists are comma-separated
// (UNYO_SERVER_ADMIN_TOKENS=tok1,tok2) and agent.labels is name=value pairs
// (UNYO_AGENT_LABELS=env=prod,zone=a); both replace the file's value rather
// than adding to it. agent.checks can only be set in the file.
//
// Variables that are set but empty are ignored, as viper does, so an empty
// `UNYO_STORE_DSN=` in a unit file does not wipe the file's value. UNYO_
// variables that name no key are ignored without an error: other tools (and
// the cmd layer, e.g. for the path of the configuration file) use the same
// prefix, so an unknown name is not evidence of a mistake.
//
// # Flags
//
// LoadOptions.Flags is the command's flag set. A flag that was set overrides
// the key it names: the key in its FlagKeyAnnotation (BindFlags defines
// --listen, --data-dir, --cluster-url and the like this way), or else the
// dotted key itself (--server.listen) or the key with dots and underscores
// written as dashes (--server-listen). Flags that name no key belong to the
// command and are left alone.
//
// # Role
//
// The command decides the role (`unyo server` decides only "root or
// cluster"); the file, UNYO_ROLE or a --role flag may state it too. Every
// statement must agree with the decision: the role changes what the whole
// configuration means, so a disagreement is reported rather than resolved
// by precedence.
//
// # Checking
//
// Load reports every problem it finds at once, one per line, each naming
// where the value came from (file, environment variable or flag), the full
// dotted key and what was expected:
//
//	configs/agent.yaml: agent.heartbeat_intervall: unknown key (did you mean cluster.heartbeat_interval?)
//	configs/agent.yaml: server.listen: expected a string host:port, got a list
//	configs/agent.yaml: agent.max_output: invalid size "64QB" (expected bytes or a size such as 64KiB)
//	environment UNYO_CLUSTER_LEASE_TTL: invalid duration "x" (expected a duration such as 10s, 1m30s or 1h)
//
// The file is parsed with yaml.v3 rather than by viper because only the YAML
// node tree keeps line numbers and the exact spelling of keys; the checked
// values are then merged with viper. agent.labels and agent.checks do not go
// through viper at all: viper lower-cases map keys and splits them at dots,
// which would turn the label app.kubernetes.io/name into nested maps and a
// check's env PATH into path.
package config

package config

import "github.com/spf13/pflag"

// FlagKeyAnnotation, set on a flag (pflag.FlagSet.SetAnnotation), names the
// configuration key the flag sets, for flags not spelled like their key
// (--listen for server.listen). BindFlags sets it on the flags it defines.
const FlagKeyAnnotation = "unyo-config-key"

// BindFlags defines on fs the flags a role's command offers for common
// settings; when set, they override file and environment (Load reads them
// through LoadOptions.Flags). role is RoleDev, RoleServer (or RoleRoot,
// RoleCluster) or RoleAgent.
//
// Secrets (tokens, the store's DSN) get no flags: a command line is visible
// to every user of the machine. The flags have no defaults of their own;
// unset flags leave the configuration alone.
func BindFlags(fs *pflag.FlagSet, role string) {
	bind := func(name, key, usage string) {
		fs.String(name, "", usage+" (config "+key+")")
		_ = fs.SetAnnotation(name, FlagKeyAnnotation, []string{key}) // the flag was just defined
	}
	bind("data-dir", "data_dir", "directory for state")
	bind("log-level", "log.level", "log level: debug, info, warn or error")
	bind("log-format", "log.format", "log format: text or json")
	switch role {
	case RoleDev, RoleServer, RoleRoot, RoleCluster:
		bind("listen", "server.listen", "address to serve the API on, host:port")
	}
	switch role {
	case RoleServer, RoleCluster:
		bind("cluster-name", "cluster.name", "name of this cluster (role cluster)")
	}
	if role == RoleAgent {
		bind("cluster-url", "agent.cluster_url", "URL of the cluster to report to")
		bind("node-name", "agent.node_name", "name this node reports as (default: the hostname)")
		bind("resource", "agent.resource", "the PhysicalResource of root's inventory this node is (default: matched by hostname, then serial number)")
		bind("status-listen", "agent.status_listen", `address of the status endpoint, host:port ("" turns it off)`)
		fs.StringToString("label", nil, "node label name=value; repeatable, replaces the configured labels (config agent.labels)")
		_ = fs.SetAnnotation("label", FlagKeyAnnotation, []string{"agent.labels"})
	}
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/docker/docker/api/types/container"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// The labels the plugin puts on every container besides the caller's
// (the agent's owner labels unyo.dev/cluster, node, compute, service).
const (
	// labelID is unyo's resource id (the compute's name): what Get, List
	// and Watch match on, whatever the container name became.
	labelID = "unyo.provider-docker/id"
	// labelConfig is the resource config as JSON, so that Get answers the
	// config the resource was created with (the SDK's idempotent Create
	// compares it) without any state outside dockerd.
	labelConfig = "unyo.provider-docker/config"
)

// Restart policies a resource may ask for (Docker's own names).
const (
	restartNo            = "no"
	restartOnFailure     = "on-failure"
	restartAlways        = "always"
	restartUnlessStopped = "unless-stopped"
	// defaultMaxRestarts bounds on-failure restarts when the config does
	// not say: a container that keeps crashing ends Failed, not in a loop.
	defaultMaxRestarts = 3
)

// ResourceConfig is one container. The fields the agent fills from an
// assignment: image (image_source), command, env, vcpus and memory_bytes
// (the flavor's shape).
type ResourceConfig struct {
	// Image is a local image reference. It is never pulled.
	Image string `json:"image"`
	// ImageTar is a `docker save` tar loaded when Image is not present.
	ImageTar string            `json:"image_tar,omitempty"`
	Command  []string          `json:"command,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	// VCPUs is the CPU quota in CPUs (0.5 is half a CPU); 0 is no limit.
	VCPUs float64 `json:"vcpus,omitempty"`
	// MemoryBytes is the memory limit; memory+swap is set to the same
	// value so the container never swaps. 0 is no limit.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// PidsLimit bounds the processes (and threads) of the container.
	PidsLimit int64 `json:"pids_limit,omitempty"`
	// Restart is Docker's restart policy: no, on-failure (the default),
	// always, unless-stopped; MaxRestarts bounds on-failure.
	Restart     string `json:"restart,omitempty"`
	MaxRestarts int    `json:"max_restarts,omitempty"`
	// Netns is the port namespace the agent made for the container: the
	// agent wires the container's network (a veth from that namespace
	// into the container's), so the container is created with network
	// mode none whatever the plugin's network_mode says.
	Netns string `json:"netns,omitempty"`
}

const resourceSchema = `{"type":"object","required":["image"],"additionalProperties":false,"properties":{` +
	`"image":{"type":"string","minLength":1},"image_tar":{"type":"string"},` +
	`"command":{"type":"array","items":{"type":"string"}},` +
	`"env":{"type":"object","additionalProperties":{"type":"string"}},` +
	`"vcpus":{"type":"number","minimum":0},"memory_bytes":{"type":"integer","minimum":0},` +
	`"pids_limit":{"type":"integer","minimum":0},` +
	`"restart":{"enum":["no","on-failure","always","unless-stopped"]},"max_restarts":{"type":"integer","minimum":0},"netns":{"type":"string"}}}`

func parseResource(m map[string]any) (ResourceConfig, error) {
	var rc ResourceConfig
	if err := sdk.Decode(m, &rc); err != nil {
		return rc, err
	}
	switch {
	case rc.Image == "":
		return rc, sdk.Invalid("image", "is required: a local image name (unyo never pulls)")
	case rc.VCPUs < 0:
		return rc, sdk.Invalid("vcpus", "must not be negative")
	case rc.MemoryBytes < 0:
		return rc, sdk.Invalid("memory_bytes", "must not be negative")
	case rc.MemoryBytes > 0 && rc.MemoryBytes < 6<<20:
		// dockerd refuses less than 6 MiB; say so before creating.
		return rc, sdk.Invalid("memory_bytes", "%d is below Docker's minimum of 6 MiB", rc.MemoryBytes)
	case rc.PidsLimit < 0:
		return rc, sdk.Invalid("pids_limit", "must not be negative")
	case rc.MaxRestarts < 0:
		return rc, sdk.Invalid("max_restarts", "must not be negative")
	}
	switch rc.Restart {
	case "", restartNo, restartOnFailure, restartAlways, restartUnlessStopped:
	default:
		return rc, sdk.Invalid("restart", "%q is not one of no, on-failure, always, unless-stopped", rc.Restart)
	}
	return rc, nil
}

// networkMode is the container's network mode: none when the agent wires
// its port (netns set), else the plugin's.
func networkMode(rc ResourceConfig, configured string) string {
	if rc.Netns != "" {
		return "none"
	}
	return configured
}

// hostConfig maps the flavor shape and restart policy onto Docker's host
// config: vcpus become a CFS quota (NanoCPUs), memory and memory+swap are
// equal (no swap), pids are bounded.
func hostConfig(rc ResourceConfig, networkMode string, init bool) *container.HostConfig {
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(networkMode),
		Init:        &init,
	}
	if rc.VCPUs > 0 {
		hc.NanoCPUs = int64(rc.VCPUs * 1e9)
	}
	if rc.MemoryBytes > 0 {
		hc.Memory = rc.MemoryBytes
		hc.MemorySwap = rc.MemoryBytes
	}
	if rc.PidsLimit > 0 {
		p := rc.PidsLimit
		hc.PidsLimit = &p
	}
	switch rc.Restart {
	case "", restartOnFailure:
		n := rc.MaxRestarts
		if n == 0 {
			n = defaultMaxRestarts
		}
		hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: n}
	case restartAlways:
		hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyAlways}
	case restartUnlessStopped:
		hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}
	default:
		hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyDisabled}
	}
	return hc
}

// containerLabels are the caller's labels plus the plugin's own; the
// plugin's win, so a caller cannot make a container claim another id.
func containerLabels(id string, labels map[string]string, config map[string]any) (map[string]string, error) {
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("the resource config is not JSON: %w", err)
	}
	out := make(map[string]string, len(labels)+2)
	maps.Copy(out, labels)
	out[labelID] = id
	out[labelConfig] = string(cfg)
	return out, nil
}

// callerLabels drops the plugin's own labels, giving back what the caller
// set.
func callerLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if k != labelID && k != labelConfig {
			out[k] = v
		}
	}
	return out
}

// containerName maps a resource id onto a Docker container name
// ([a-zA-Z0-9][a-zA-Z0-9_.-]*). Ids that are valid names stay readable;
// others are sanitized and get a digest of the id, so two ids never share
// a name.
func containerName(prefix, id string) string {
	var b strings.Builder
	clean := true
	for i, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '_' || r == '.' || r == '-'))
		if !ok {
			clean = false
			r = '_'
		}
		b.WriteRune(r)
	}
	if clean && id != "" {
		return prefix + id
	}
	sum := sha256.Sum256([]byte(id))
	return prefix + b.String() + "-" + hex.EncodeToString(sum[:4])
}

// observed is what the plugin reads of a container to judge its state.
type observed struct {
	Status       string // created, running, paused, restarting, removing, exited, dead
	ExitCode     int
	OOMKilled    bool
	Error        string
	Health       string // "", starting, healthy, unhealthy
	RestartCount int
	MaxRestarts  int
	Logs         string // the last lines of output, for a reason
}

// stateOf maps a container's state onto the resource's: running (also
// while its health check starts), failed with a reason naming the exit
// code, the OOM kill and the last output lines, or stopped after a clean
// exit.
func stateOf(o observed) (pluginv1.ResourceState, string) {
	exit := func() string {
		var s string
		switch {
		case o.OOMKilled:
			s = fmt.Sprintf("killed by the kernel's OOM killer at its memory limit (exit status %d)", o.ExitCode)
		case o.Error != "":
			s = fmt.Sprintf("exited with status %d: %s", o.ExitCode, o.Error)
		default:
			s = fmt.Sprintf("exited with status %d", o.ExitCode)
		}
		if o.RestartCount > 0 {
			s += fmt.Sprintf(" after %d restarts", o.RestartCount)
		}
		if o.Logs != "" {
			s += "; last output: " + o.Logs
		}
		return s
	}
	switch o.Status {
	case "running":
		if o.Health == "unhealthy" {
			return sdk.Broken, "running but its health check fails"
		}
		return sdk.Running, ""
	case "paused":
		return sdk.Stopped, "paused"
	case "restarting":
		return sdk.Broken, exit() + "; Docker is restarting it"
	case "created":
		return sdk.Pending, "created, not started"
	case "removing":
		return sdk.Deleted, "being removed"
	case "dead":
		return sdk.Broken, "dead: Docker could not remove or stop it cleanly"
	case "exited":
		if o.ExitCode == 0 && !o.OOMKilled {
			return sdk.Stopped, exit()
		}
		return sdk.Broken, exit()
	}
	return sdk.Broken, fmt.Sprintf("unknown Docker state %q", o.Status)
}

// lastLines keeps the last n non-empty lines of s, joined by " | " so a
// reason stays one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var keep []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, " | ")
}

// fits says why a resource's shape does not fit the node (its dockerd's
// CPUs and memory), "" when it fits: such a container would be refused
// (CPUs) or never get what it asked for (memory).
func fits(rc ResourceConfig, cpus int, memory int64) string {
	switch {
	case cpus > 0 && rc.VCPUs > float64(cpus):
		return fmt.Sprintf("the flavor asks for %g vCPUs and this node has %d", rc.VCPUs, cpus)
	case memory > 0 && rc.MemoryBytes > memory:
		return fmt.Sprintf("the flavor asks for %d MiB of memory and this node has %d MiB", rc.MemoryBytes>>20, memory>>20)
	}
	return ""
}

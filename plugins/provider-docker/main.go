// Command unyo-provider-docker is a provider plugin that runs each
// resource as a Docker container through the Docker Engine API (the
// official Go client, negotiating the API version with the daemon).
//
// All of a resource's state lives in dockerd: the container carries unyo's
// resource id and the resource config as labels (with the caller's owner
// labels beside them), so Get, List and Recover need nothing but the
// daemon, and survive restarts of the plugin, the agent and dockerd.
//
// Images are never pulled: a resource names a local image, or a tar
// (`docker save` format) that is loaded when the image is missing. A
// missing image fails Create with an error naming it.
//
// Restart policy: Docker's own. By default a container that exits with a
// non-zero status or is OOM-killed is restarted by dockerd (on-failure,
// at most max_restarts times, default 3, with dockerd's doubling backoff
// from 100 ms); then it stays exited and the resource is failed with its
// exit status and last output lines as the reason. Watch reports each
// die, oom and health change as it happens. After dockerd itself
// restarts, Recover starts a container whose policy wants it running and
// that dockerd did not restart.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/unyo-ops/unyo/plugins/sdk"
)

const (
	version = "1.0.0"
	name    = "docker"
	// handleVersion is the layout of Handle.State; bump it when it changes
	// and keep reading the old one.
	handleVersion = 1
	// reasonLogLines is how many output lines a failed resource's reason
	// carries.
	reasonLogLines = 5
)

// Config is plugin-wide.
type Config struct {
	// Host is dockerd's address (unix:///var/run/docker.sock by default).
	Host string `json:"host,omitempty"`
	// NamePrefix starts every container name (default "unyo-").
	NamePrefix string `json:"name_prefix,omitempty"`
	// NetworkMode of the containers (default "none": unyo gives each
	// compute its addresses through its own port namespaces).
	NetworkMode string `json:"network_mode,omitempty"`
	// Init runs Docker's init as PID 1 (default true), so a container
	// whose command ignores SIGTERM still stops within Delete's grace.
	Init *bool `json:"init,omitempty"`
}

// handleState is Handle.State (version 1).
type handleState struct {
	ContainerID string `json:"container_id"`
	Name        string `json:"name"`
}

type dockerProvider struct {
	mu  sync.Mutex
	cfg Config
	cli *client.Client
}

func (*dockerProvider) Info() sdk.Info {
	return sdk.Info{Name: name, Version: version, Description: "runs each resource as a Docker container (Docker Engine API; never pulls images)"}
}

func (*dockerProvider) ConfigSchema() string {
	return `{"type":"object","additionalProperties":false,"properties":{` +
		`"host":{"type":"string","minLength":1},"name_prefix":{"type":"string"},` +
		`"network_mode":{"type":"string","minLength":1},"init":{"type":"boolean"}}}`
}

func (p *dockerProvider) Configure(_ context.Context, c map[string]any) error {
	var cfg Config
	if err := sdk.Decode(c, &cfg); err != nil {
		return err
	}
	if cfg.Host == "" {
		cfg.Host = client.DefaultDockerHost
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "unyo-"
	}
	if cfg.NetworkMode == "" {
		cfg.NetworkMode = "none"
	}
	if cfg.Init == nil {
		t := true
		cfg.Init = &t
	}
	cli, err := client.NewClientWithOpts(client.WithHost(cfg.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return sdk.Invalid("host", "%q is not a usable Docker address: %v", cfg.Host, err)
	}
	p.mu.Lock()
	old := p.cli
	p.cfg, p.cli = cfg, cli
	p.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// docker returns the client and config; before Configure the client is
// nil and every operation says so.
func (p *dockerProvider) docker() (*client.Client, Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli == nil {
		return nil, p.cfg, errors.New("provider docker: not configured")
	}
	return p.cli, p.cfg, nil
}

func (p *dockerProvider) Probe(ctx context.Context) (bool, string) {
	cli, cfg, err := p.docker()
	if err != nil {
		return false, err.Error()
	}
	if _, err := cli.Ping(ctx); err != nil {
		return false, fmt.Sprintf("dockerd at %s does not answer: %v", cfg.Host, err)
	}
	return true, ""
}

func (*dockerProvider) ResourceType() string   { return "container" }
func (*dockerProvider) ResourceSchema() string { return resourceSchema }

func (*dockerProvider) Validate(_ context.Context, config map[string]any) error {
	_, err := parseResource(config)
	return err
}

// ensureImage makes sure the image is present, loading the tar when one is
// given; it never pulls.
func ensureImage(ctx context.Context, cli *client.Client, rc ResourceConfig) error {
	_, err := cli.ImageInspect(ctx, rc.Image)
	if err == nil {
		return nil
	}
	if !client.IsErrNotFound(err) {
		return fmt.Errorf("provider docker: inspecting image %q: %w", rc.Image, err)
	}
	if rc.ImageTar == "" {
		return status.Errorf(codes.FailedPrecondition, "provider docker: image %q is not present on this node's dockerd and no image_tar is given (unyo never pulls images)", rc.Image)
	}
	f, err := os.Open(rc.ImageTar)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "provider docker: image %q is missing and its image_tar cannot be read: %v", rc.Image, err)
	}
	defer f.Close()
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "provider docker: loading %s for image %q: %v", rc.ImageTar, rc.Image, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := cli.ImageInspect(ctx, rc.Image); err != nil {
		return status.Errorf(codes.FailedPrecondition, "provider docker: %s was loaded but holds no image %q: %v", rc.ImageTar, rc.Image, err)
	}
	return nil
}

func (p *dockerProvider) Create(ctx context.Context, req sdk.CreateRequest) (sdk.Resource, error) {
	rc, err := parseResource(req.Config)
	if err != nil {
		return sdk.Resource{}, err
	}
	cli, cfg, err := p.docker()
	if err != nil {
		return sdk.Resource{}, err
	}
	if rc.VCPUs > 0 || rc.MemoryBytes > 0 {
		info, err := cli.Info(ctx)
		if err != nil {
			return sdk.Resource{}, fmt.Errorf("provider docker: dockerd at %s does not answer: %w", cfg.Host, err)
		}
		if why := fits(rc, info.NCPU, info.MemTotal); why != "" {
			return sdk.Resource{}, status.Errorf(codes.FailedPrecondition, "provider docker: %s", why)
		}
	}
	if err := ensureImage(ctx, cli, rc); err != nil {
		return sdk.Resource{}, err
	}
	labels, err := containerLabels(req.ID, req.Labels, req.Config)
	if err != nil {
		return sdk.Resource{}, sdk.Invalid("config", "%v", err)
	}
	cname := containerName(cfg.NamePrefix, req.ID)
	// The SDK called Get first and found nothing usable: a container of
	// this name is the remains of a Create interrupted before its start.
	if err := removeContainer(ctx, cli, cname, 0); err != nil {
		return sdk.Resource{}, err
	}
	env := make([]string, 0, len(rc.Env))
	for _, k := range slices.Sorted(maps.Keys(rc.Env)) {
		env = append(env, k+"="+rc.Env[k])
	}
	cc := &container.Config{Image: rc.Image, Env: env, Labels: labels}
	if len(rc.Command) > 0 {
		cc.Cmd = rc.Command
	}
	created, err := cli.ContainerCreate(ctx, cc, hostConfig(rc, networkMode(rc, cfg.NetworkMode), *cfg.Init), nil, nil, cname)
	if err != nil {
		return sdk.Resource{}, fmt.Errorf("provider docker: creating container %s: %w", cname, err)
	}
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// A failed Create leaves nothing behind.
		_ = removeContainer(context.WithoutCancel(ctx), cli, created.ID, 0)
		return sdk.Resource{}, fmt.Errorf("provider docker: starting container %s: %w", cname, err)
	}
	return p.Get(ctx, req.ID)
}

// find returns the container of resource id, ErrNotFound if there is none.
func (p *dockerProvider) find(ctx context.Context, id string) (container.InspectResponse, error) {
	cli, cfg, err := p.docker()
	if err != nil {
		return container.InspectResponse{}, err
	}
	ins, err := cli.ContainerInspect(ctx, containerName(cfg.NamePrefix, id))
	if client.IsErrNotFound(err) || (err == nil && ins.Config.Labels[labelID] != id) {
		return container.InspectResponse{}, fmt.Errorf("provider docker: no container for %s: %w", id, sdk.ErrNotFound)
	}
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("provider docker: inspecting the container of %s: %w", id, err)
	}
	return ins, nil
}

func (p *dockerProvider) Get(ctx context.Context, id string) (sdk.Resource, error) {
	ins, err := p.find(ctx, id)
	if err != nil {
		return sdk.Resource{}, err
	}
	if ins.State != nil && ins.State.Status == "created" {
		// Never started: its Create was interrupted. Reported as absent
		// so that the next Create replaces it rather than adopting a
		// container that does not run.
		return sdk.Resource{}, fmt.Errorf("provider docker: the container of %s was never started: %w", id, sdk.ErrNotFound)
	}
	return p.resource(ctx, ins), nil
}

// resource builds the resource from an inspected container.
func (p *dockerProvider) resource(ctx context.Context, ins container.InspectResponse) sdk.Resource {
	labels := ins.Config.Labels
	var cfg map[string]any
	_ = json.Unmarshal([]byte(labels[labelConfig]), &cfg)
	r := sdk.Resource{ID: labels[labelID], Labels: callerLabels(labels), Config: cfg,
		Handle:     sdk.NewHandle(handleVersion, handleState{ContainerID: ins.ID, Name: ins.Name}),
		Attributes: map[string]string{"container_id": ins.ID, "container_name": trimSlash(ins.Name), "image": ins.Config.Image}}
	if t, err := time.Parse(time.RFC3339Nano, ins.Created); err == nil {
		r.CreatedAt = t
	}
	o := observed{RestartCount: ins.RestartCount}
	if st := ins.State; st != nil {
		o.Status, o.ExitCode, o.OOMKilled, o.Error = st.Status, st.ExitCode, st.OOMKilled, st.Error
		if st.Health != nil {
			o.Health = st.Health.Status
		}
	}
	if ins.HostConfig != nil {
		o.MaxRestarts = ins.HostConfig.RestartPolicy.MaximumRetryCount
	}
	if st := ins.State; st != nil && st.Running && st.Pid > 0 {
		// Where the agent wires the container's port (a restart makes a
		// new namespace, and the agent wires it again).
		r.Attributes["netns"] = fmt.Sprintf("/proc/%d/ns/net", st.Pid)
	}
	if o.Status == "exited" || o.Status == "restarting" || o.Status == "dead" {
		if cli, _, err := p.docker(); err == nil {
			o.Logs = tailLogs(ctx, cli, ins.ID, reasonLogLines)
		}
		r.Attributes["exit_code"] = strconv.Itoa(o.ExitCode)
	}
	r.State, r.Reason = stateOf(o)
	return r
}

// tailLogs returns the last n lines of a container's output, "" if they
// cannot be read.
func tailLogs(ctx context.Context, cli *client.Client, cid string, n int) string {
	rd, err := cli.ContainerLogs(ctx, cid, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n)})
	if err != nil {
		return ""
	}
	defer rd.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(rd, 64<<10)); err != nil && out.Len() == 0 {
		return ""
	}
	return lastLines(out.String(), n)
}

func (p *dockerProvider) Delete(ctx context.Context, id string, grace time.Duration) (bool, error) {
	cli, cfg, err := p.docker()
	if err != nil {
		return false, err
	}
	cname := containerName(cfg.NamePrefix, id)
	ins, err := cli.ContainerInspect(ctx, cname)
	if client.IsErrNotFound(err) || (err == nil && ins.Config.Labels[labelID] != id) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("provider docker: inspecting the container of %s: %w", id, err)
	}
	return true, removeContainer(ctx, cli, ins.ID, grace)
}

// removeContainer stops a container (SIGTERM, SIGKILL after grace) and
// removes it with its anonymous volumes; an absent container is fine.
func removeContainer(ctx context.Context, cli *client.Client, ref string, grace time.Duration) error {
	secs := int(grace.Round(time.Second) / time.Second)
	if err := cli.ContainerStop(ctx, ref, container.StopOptions{Timeout: &secs}); err != nil && !client.IsErrNotFound(err) {
		// Removing with force kills it anyway; the stop error is only
		// worth a word if the removal fails too.
		if rerr := cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !client.IsErrNotFound(rerr) {
			return fmt.Errorf("provider docker: stopping container %s: %v; removing it: %w", ref, err, rerr)
		}
		return nil
	}
	if err := cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !client.IsErrNotFound(err) {
		return fmt.Errorf("provider docker: removing container %s: %w", ref, err)
	}
	return nil
}

// List returns the resources whose containers carry all the labels.
func (p *dockerProvider) List(ctx context.Context, labels map[string]string) ([]sdk.Resource, error) {
	cli, _, err := p.docker()
	if err != nil {
		return nil, err
	}
	f := filters.NewArgs(filters.Arg("label", labelID))
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("provider docker: listing containers: %w", err)
	}
	var out []sdk.Resource
	for _, c := range cs {
		ins, err := cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, p.resource(ctx, ins))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Recover finds the container from the stored handle (by id, then by name,
// then by the resource's label) and, after a dockerd restart that left it
// exited although its restart policy wants it running, starts it again.
func (p *dockerProvider) Recover(ctx context.Context, id string, h sdk.Handle) (sdk.Resource, error) {
	hs, err := sdk.ReadHandle(name, h, handleVersion, func(hs handleState) bool { return hs.ContainerID != "" || hs.Name != "" })
	if err != nil {
		return sdk.Resource{}, err
	}
	cli, _, err := p.docker()
	if err != nil {
		return sdk.Resource{}, err
	}
	var ins container.InspectResponse
	found := false
	for _, ref := range []string{hs.ContainerID, trimSlash(hs.Name)} {
		if ref == "" {
			continue
		}
		ins, err = cli.ContainerInspect(ctx, ref)
		if err == nil {
			found = true
			break
		}
		if !client.IsErrNotFound(err) {
			return sdk.Resource{}, fmt.Errorf("provider docker: inspecting container %s: %w", ref, err)
		}
	}
	if !found {
		ins, err = p.find(ctx, id)
		if err != nil {
			return sdk.Resource{}, err
		}
	}
	if got := ins.Config.Labels[labelID]; got != id {
		return sdk.Resource{}, fmt.Errorf("provider docker: handle of %s points at the container of %q: %w", id, got, sdk.ErrBadHandle)
	}
	if ins.State != nil && shouldRestart(ins) {
		if err := cli.ContainerStart(ctx, ins.ID, container.StartOptions{}); err != nil {
			return sdk.Resource{}, fmt.Errorf("provider docker: restarting the container of %s after recovery: %w", id, err)
		}
		if ins, err = cli.ContainerInspect(ctx, ins.ID); err != nil {
			return sdk.Resource{}, fmt.Errorf("provider docker: inspecting the container of %s: %w", id, err)
		}
	}
	if ins.State != nil && ins.State.Status == "created" {
		return sdk.Resource{}, fmt.Errorf("provider docker: the container of %s was never started: %w", id, sdk.ErrNotFound)
	}
	return p.resource(ctx, ins), nil
}

// shouldRestart says whether a container found stopped on recovery is one
// its restart policy wants running: dockerd killed with it (exit 255 or
// 137 with no OOM) or exited non-zero with restarts left under on-failure,
// or any exit under always/unless-stopped. A container dockerd gave up on
// (on-failure exhausted) stays failed.
func shouldRestart(ins container.InspectResponse) bool {
	st := ins.State
	if st.Status != "exited" || ins.HostConfig == nil {
		return false
	}
	rp := ins.HostConfig.RestartPolicy
	switch rp.Name {
	case container.RestartPolicyAlways, container.RestartPolicyUnlessStopped:
		return true
	case container.RestartPolicyOnFailure:
		return st.ExitCode != 0 && (rp.MaximumRetryCount == 0 || ins.RestartCount < rp.MaximumRetryCount)
	}
	return false
}

// trimSlash drops the "/" Docker puts before container names.
func trimSlash(s string) string { return strings.TrimPrefix(s, "/") }

func main() {
	sdk.Serve(&dockerProvider{})
}

// Package lb is the resource config every load-balancer provider (xdp,
// vpp) receives: the agent builds it from a Loadbalancer assignment, the
// provider decodes and validates it with this package. One definition, so
// the agent and every provider agree on the fields.
package lb

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/unyo-ops/unyo/plugins/sdk/sdkconfig"
)

// Config is one load balancer: a VIP, its ports, the backends behind it
// and how they are health-checked.
type Config struct {
	VIP      string    `json:"vip"`
	Ports    []Port    `json:"ports"`
	Backends []Backend `json:"backends"`
	Health   Health    `json:"health"`
}

// Port maps a VIP port to the backends' port.
type Port struct {
	Port       int `json:"port"`
	TargetPort int `json:"target_port,omitempty"`
	// tcp or udp.
	Protocol string `json:"protocol"`
}

// Target is the backends' port: TargetPort, or Port when unset.
func (p Port) Target() int {
	if p.TargetPort == 0 {
		return p.Port
	}
	return p.TargetPort
}

// Backend is one replica in rotation.
type Backend struct {
	// The replica's name (the Compute), for status and metrics labels.
	Name    string `json:"name"`
	Address string `json:"address"`
	// Relative share of new flows; 0 means 1.
	Weight int `json:"weight,omitempty"`
}

// Health is how the provider checks a backend.
type Health struct {
	// tcp, http or none; empty means tcp.
	Kind string `json:"kind,omitempty"`
	Path string `json:"path,omitempty"`
	// 0 means the first port's target.
	Port     int                `json:"port,omitempty"`
	Interval sdkconfig.Duration `json:"interval,omitempty"`
	Timeout  sdkconfig.Duration `json:"timeout,omitempty"`
	Fall     int                `json:"fall,omitempty"`
	Rise     int                `json:"rise,omitempty"`
}

// The health check's defaults.
const (
	DefaultInterval = 2 * time.Second
	DefaultTimeout  = time.Second
	DefaultFall     = 2
	DefaultRise     = 2
)

// WithDefaults returns the health check with every unset field at its
// default, for a config whose first port is first.
func (h Health) WithDefaults(first Port) Health {
	if h.Kind == "" {
		h.Kind = "tcp"
	}
	if h.Kind == "http" && h.Path == "" {
		h.Path = "/"
	}
	if h.Port == 0 {
		h.Port = first.Target()
	}
	if h.Interval <= 0 {
		h.Interval = sdkconfig.Duration(DefaultInterval)
	}
	if h.Timeout <= 0 {
		h.Timeout = sdkconfig.Duration(DefaultTimeout)
	}
	if h.Fall <= 0 {
		h.Fall = DefaultFall
	}
	if h.Rise <= 0 {
		h.Rise = DefaultRise
	}
	return h
}

// MaxBackends bounds a config: a provider's tables are sized for it.
const MaxBackends = 256

// Decode reads a resource config into a Config and validates it; problems
// come back as *sdkconfig.ConfigError naming the field.
func Decode(m map[string]any) (Config, error) {
	var c Config
	if err := sdkconfig.Decode(m, &c); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// Validate checks the config, naming the first wrong field.
func (c Config) Validate() error {
	vip, err := netip.ParseAddr(c.VIP)
	if err != nil || !vip.Is4() {
		return sdkconfig.Invalid("vip", "must be an IPv4 address, not %q", c.VIP)
	}
	if len(c.Ports) == 0 {
		return sdkconfig.Invalid("ports", "must list at least one port")
	}
	seen := map[string]bool{}
	for i, p := range c.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		if p.Port < 1 || p.Port > 65535 {
			return sdkconfig.Invalid(f+".port", "must be 1-65535, not %d", p.Port)
		}
		if p.TargetPort < 0 || p.TargetPort > 65535 {
			return sdkconfig.Invalid(f+".target_port", "must be 1-65535 (or 0 for port), not %d", p.TargetPort)
		}
		if p.Protocol != "tcp" && p.Protocol != "udp" {
			return sdkconfig.Invalid(f+".protocol", "must be tcp or udp, not %q", p.Protocol)
		}
		if k := fmt.Sprint(p.Protocol, p.Port); seen[k] {
			return sdkconfig.Invalid(f, "repeats %s port %d", p.Protocol, p.Port)
		} else {
			seen[k] = true
		}
	}
	if len(c.Backends) > MaxBackends {
		return sdkconfig.Invalid("backends", "has %d entries, at most %d", len(c.Backends), MaxBackends)
	}
	addrs := map[netip.Addr]bool{}
	for i, b := range c.Backends {
		f := fmt.Sprintf("backends[%d]", i)
		a, err := netip.ParseAddr(b.Address)
		if err != nil || !a.Is4() {
			return sdkconfig.Invalid(f+".address", "must be an IPv4 address, not %q", b.Address)
		}
		if addrs[a] {
			return sdkconfig.Invalid(f+".address", "repeats %s", a)
		}
		addrs[a] = true
		if b.Weight < 0 || b.Weight > 100 {
			return sdkconfig.Invalid(f+".weight", "must be 0-100, not %d", b.Weight)
		}
	}
	switch c.Health.Kind {
	case "", "tcp", "http", "none":
	default:
		return sdkconfig.Invalid("health.kind", "must be tcp, http or none, not %q", c.Health.Kind)
	}
	if c.Health.Port < 0 || c.Health.Port > 65535 {
		return sdkconfig.Invalid("health.port", "must be 1-65535 (or 0 for the first port's target), not %d", c.Health.Port)
	}
	if c.Health.Fall < 0 || c.Health.Rise < 0 {
		return sdkconfig.Invalid("health", "fall and rise must not be negative")
	}
	return nil
}

// Schema is the JSON schema of Config, for a provider's SchemaResponse.
const Schema = `{"type":"object","required":["vip","ports"],"additionalProperties":false,"properties":{` +
	`"vip":{"type":"string"},` +
	`"ports":{"type":"array","minItems":1,"items":{"type":"object","required":["port","protocol"],"additionalProperties":false,"properties":{` +
	`"port":{"type":"integer","minimum":1,"maximum":65535},"target_port":{"type":"integer","minimum":0,"maximum":65535},"protocol":{"enum":["tcp","udp"]}}}},` +
	`"backends":{"type":"array","maxItems":256,"items":{"type":"object","required":["address"],"additionalProperties":false,"properties":{` +
	`"name":{"type":"string"},"address":{"type":"string"},"weight":{"type":"integer","minimum":0,"maximum":100}}}},` +
	`"health":{"type":"object","additionalProperties":false,"properties":{` +
	`"kind":{"enum":["tcp","http","none"]},"path":{"type":"string"},"port":{"type":"integer","minimum":0,"maximum":65535},` +
	`"interval":{"type":["string","number"]},"timeout":{"type":["string","number"]},"fall":{"type":"integer","minimum":0},"rise":{"type":"integer","minimum":0}}}}}`

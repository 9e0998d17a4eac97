package sdk

import "github.com/unyo-ops/unyo/plugins/sdk/sdkconfig"

// Decode fills out (a pointer to a struct with json tags) from a config or
// target map, refusing unknown fields; problems come back as *ConfigError
// naming the field, ready to return from Configure, Validate or Check.
func Decode(m map[string]any, out any) error { return sdkconfig.Decode(m, out) }

// Duration is a config duration written as "1.5s" or as seconds.
type Duration = sdkconfig.Duration

package api

import "embed"

// Schema is the proto sources, for the comments `unyo explain` prints
// (generated code keeps the descriptors but not their comments).
//
//go:embed unyo/v1/*.proto
var Schema embed.FS

// Package pluginv1 is the generated code of the unyo plugin protocol,
// version 1. The .proto files next to it are the source; see them (and
// plugins/README.md) for the meaning of every call and its error model.
package pluginv1

//go:generate sh -c "cd ../../../.. && protoc -I proto --go_out=proto --go_opt=paths=source_relative --go-grpc_out=proto --go-grpc_opt=paths=source_relative unyo/plugin/v1/plugin.proto unyo/plugin/v1/check.proto unyo/plugin/v1/action.proto unyo/plugin/v1/provider.proto"

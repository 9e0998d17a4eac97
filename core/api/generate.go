// Package api holds unyo's one protobuf schema and the code generated from it.
package api

//go:generate protoc -I . --go_out=. --go_opt=module=github.com/unyo-ops/unyo/core/api --connect-go_out=. --connect-go_opt=module=github.com/unyo-ops/unyo/core/api unyo/v1/unyo.proto unyo/v1/provision.proto unyo/v1/billing.proto

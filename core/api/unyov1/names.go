package unyov1

// Display names the operator reads, shared by the printer and the cluster's
// messages (hand-written beside the generated code).

// DisplayName is the node state as `unyo nodes ls` and liveness events
// spell it.
func (s NodeState) DisplayName() string {
	switch s {
	case NodeState_NODE_STATE_READY:
		return "Ready"
	case NodeState_NODE_STATE_STALE:
		return "Stale"
	case NodeState_NODE_STATE_DOWN:
		return "Down"
	}
	return "Unknown"
}

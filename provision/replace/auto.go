package replace

import (
	"fmt"
	"time"
)

// AutoNode is one node as the automatic cordon and drain see it.
type AutoNode struct {
	Ready bool
	// NotReadySince is when the node stopped being Ready (its last
	// heartbeat); ReadySince when it was last seen turning Ready.
	NotReadySince, ReadySince time.Time
	Cordoned                  bool
	// AutoCordoned: unyo cordoned the node on its own.
	AutoCordoned bool
	// Drained: a drain runs or ran on the node (until it is uncordoned).
	Drained bool
	// CordonAfter and DrainAfter are the settings in force; 0 is off.
	CordonAfter, DrainAfter time.Duration
}

// AutoAction is what the automatic cordon and drain do to a node.
type AutoAction int

const (
	AutoNone AutoAction = iota
	// AutoCordon: not Ready for CordonAfter.
	AutoCordon
	// AutoUncordon: Ready again for CordonAfter after unyo cordoned it.
	AutoUncordon
	// AutoDrain: not Ready for DrainAfter.
	AutoDrain
)

func (a AutoAction) String() string {
	return [...]string{"none", "auto-cordon", "auto-uncordon", "auto-drain"}[a]
}

// Auto decides n's automatic action at now. A node unyo drained stays
// cordoned until an operator uncordons it: it was emptied on purpose.
func Auto(now time.Time, n AutoNode) AutoAction {
	if !n.Ready {
		down := now.Sub(n.NotReadySince)
		switch {
		case n.DrainAfter > 0 && down >= n.DrainAfter && !n.Drained:
			return AutoDrain
		case n.CordonAfter > 0 && down >= n.CordonAfter && !n.Cordoned:
			return AutoCordon
		}
		return AutoNone
	}
	if n.AutoCordoned && n.Cordoned && !n.Drained && n.CordonAfter > 0 && now.Sub(n.ReadySince) >= n.CordonAfter {
		return AutoUncordon
	}
	return AutoNone
}

// ParseAfter reads an interval setting: a Go duration, or "off" (0).
// Empty is def.
func ParseAfter(s string, def time.Duration) (time.Duration, error) {
	switch s {
	case "":
		return def, nil
	case "off":
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("interval %q: want a positive duration (5m, 1h) or off", s)
	}
	return d, nil
}

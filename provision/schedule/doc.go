// Package schedule decides where replicas go: which clusters a replica set is
// given to (the cluster stage, at root) and which node each replica lands on
// (the node stage, in the cluster), and, when a replica cannot be placed,
// exactly why.
//
// It is modelled on Nomad's scheduler and the Kubernetes scheduler
// framework: feasibility filters reject nodes, each rejection counted by
// reason; scores rank the survivors with weights; the winner is chosen by
// score, then by name, so the same inputs always give the same answer. Each
// placement counts before the next replica is placed, so anti-affinity and
// spread see the replicas placed earlier in the same call. Nothing is ever
// overcommitted: vCPUs, memory and disk are each checked against capacity
// minus every reservation.
//
// The package is pure: no I/O, no clock, no goroutines. It leaves to its
// callers reading nodes, reservations and placements from the store; writing
// each reservation atomically, with Check as the re-check inside that
// transaction and the node's Generation compared by the store; retrying
// NoCapacity when capacity changes and failing Unsatisfiable at once; and
// passing a replica set a cluster turned down to the next cluster, a bounded
// number of times. Place indexes the nodes on every call; a caller placing
// many requests over the same nodes keeps a Snapshot.
package schedule

package root

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/kinds"
)

// Objects of an Everywhere kind (checks, rules) applied without a cluster
// are meant for every cluster, now and later. Root keeps them in its own
// store (cluster "", origin "root") and brings each cluster up to date:
// when it registers (a new cluster, or one coming back) and every
// SyncInterval, so that a cluster that was down during an apply or a
// delete converges. In a cluster, a copy marked origin "root" is root's to
// replace and delete; an object the cluster got by name (origin "")
// overrides root's object of that name there and is left alone; a default
// rule (origin "defaults") gives way to root's object of its name.

// DefaultSyncInterval is how often root brings every cluster up to date
// when Options.SyncInterval is 0.
const DefaultSyncInterval = time.Minute

// syncRetry is how soon a cluster that could not be brought up to date
// is tried again; the wait doubles up to the sync interval.
const syncRetry = 2 * time.Second

// syncAfterRegister gives a registering cluster time to keep the
// credential root just gave it before root calls it.
const syncAfterRegister = 500 * time.Millisecond

// registered asks the sync loop to bring a cluster up to date soon.
func (r *Root) registered(name string) {
	r.servicesChanged() // its nodes may take replicas waiting for capacity
	select {
	case r.nudge <- name:
	default: // the loop is busy; the periodic pass reaches the cluster
	}
}

// syncLoop brings clusters up to date with root's objects until ctx ends.
func (r *Root) syncLoop(ctx context.Context) {
	type due struct {
		at   time.Time
		wait time.Duration // after the next failure
	}
	pending := map[string]due{}
	all := func() {
		cs, err := r.store.ListClusters(ctx)
		if err != nil {
			r.log.Warn("listing the clusters to bring them up to date failed", "err", err)
			return
		}
		for _, c := range cs {
			if _, ok := pending[c.GetName()]; !ok {
				pending[c.GetName()] = due{at: time.Now(), wait: syncRetry}
			}
		}
	}
	all()
	full := time.NewTicker(r.opts.SyncInterval)
	defer full.Stop()
	tick := time.NewTicker(syncAfterRegister)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-r.nudge:
			pending[name] = due{at: time.Now().Add(syncAfterRegister), wait: syncRetry}
		case <-r.nudgeAll:
			all()
		case <-full.C:
			all()
		case <-tick.C:
			for name, d := range pending {
				if time.Now().Before(d.at) {
					continue
				}
				err := r.syncCluster(ctx, name)
				if err == nil || ctx.Err() != nil {
					delete(pending, name)
					continue
				}
				r.log.Warn("bringing a cluster up to date with root's objects failed; will retry", "cluster", name, "retry_in", d.wait, "err", err)
				pending[name] = due{at: time.Now().Add(d.wait), wait: min(2*d.wait, r.opts.SyncInterval)}
			}
		}
	}
}

// syncCluster brings one cluster up to date with root: the objects meant
// for every cluster, and where its nodes sit (topology.go).
func (r *Root) syncCluster(ctx context.Context, name string) error {
	ci, err := r.store.GetCluster(ctx, name)
	if err != nil {
		return fmt.Errorf("read cluster %q: %w", name, err)
	}
	cl, err := r.client(ctx, ci)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ClusterTimeout)
	defer cancel()
	gerr := r.syncGlobals(ctx, name, ci, cl)
	terr := r.syncTopology(ctx, name, cl)
	if terr != nil {
		terr = fmt.Errorf("node topology: %w", clusterHints.Explain(ci.GetUrl(), terr))
	}
	return errors.Join(gerr, terr)
}

// syncGlobals brings one cluster up to date with root's objects meant for
// every cluster: it applies those the cluster lacks or holds an older copy
// of (the cluster's store leaves an equal copy untouched) and deletes the
// copies of objects root no longer has.
func (r *Root) syncGlobals(ctx context.Context, name string, ci *unyov1.ClusterInfo, cl *client.Clients) error {
	var everywhere []string
	for _, k := range r.opts.Kinds.Kinds() {
		if k.Everywhere && !own(k) {
			everywhere = append(everywhere, k.Name)
		}
	}
	// A root that never kept such an object has nothing to bring, and no
	// cluster holds a copy of root's to delete.
	if rev, err := r.store.ObjectsRevision(ctx, everywhere...); err != nil || rev == 0 {
		return err
	}
	var apply []*unyov1.Object
	var del []*unyov1.ObjectRef
	for _, k := range r.opts.Kinds.Kinds() {
		if !k.Everywhere || own(k) {
			continue
		}
		want, err := r.store.ListObjects(ctx, k.Name)
		if err != nil {
			return fmt.Errorf("list root's %s objects: %w", k.Name, err)
		}
		resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: k.Name}))
		if err != nil {
			return fmt.Errorf("list the cluster's %s objects: %w", k.Name, clusterHints.Explain(ci.GetUrl(), err))
		}
		have := map[string]*unyov1.Object{}
		for _, o := range resp.Msg.GetObjects() {
			have[kinds.Name(o)] = o
		}
		wanted := map[string]bool{}
		for _, g := range want {
			if kinds.Origin(g) != kinds.OriginRoot {
				continue // not root's: a root sharing a cluster's database sees the cluster's objects
			}
			wanted[kinds.Name(g)] = true
			h, ok := have[kinds.Name(g)]
			if ok && kinds.Origin(h) == "" {
				continue // the cluster's own object of this name overrides root's
			}
			c := proto.Clone(g).(*unyov1.Object)
			kinds.SetCluster(c, name)
			kinds.SetOrigin(c, kinds.OriginRoot)
			if ok && sameContent(k, c, h) {
				continue // up to date: a large set is not sent again every pass
			}
			apply = append(apply, c)
		}
		for n, h := range have {
			if kinds.Origin(h) == kinds.OriginRoot && !wanted[n] {
				del = append(del, &unyov1.ObjectRef{Kind: k.Name, Name: n, Cluster: name})
			}
		}
	}
	var errs []error
	if len(apply) > 0 {
		resp, err := cl.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: apply}))
		if err != nil {
			errs = append(errs, fmt.Errorf("apply root's objects: %w", clusterHints.Explain(ci.GetUrl(), err)))
			resp = connect.NewResponse(&unyov1.ApplyResponse{})
		}
		for _, res := range resp.Msg.GetResults() {
			if res.GetAction() != "unchanged" {
				r.log.Info("brought a cluster up to date", "cluster", name, "kind", res.GetRef().GetKind(), "name", res.GetRef().GetName(), "action", res.GetAction())
			}
		}
	}
	if len(del) > 0 {
		resp, err := cl.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: del}))
		if err != nil {
			errs = append(errs, fmt.Errorf("delete objects root no longer has: %w", clusterHints.Explain(ci.GetUrl(), err)))
			resp = connect.NewResponse(&unyov1.DeleteResponse{})
		}
		for _, res := range resp.Msg.GetResults() {
			r.log.Info("brought a cluster up to date", "cluster", name, "kind", res.GetRef().GetKind(), "name", res.GetRef().GetName(), "action", res.GetAction())
		}
	}
	return errors.Join(errs...)
}

// sameContent says whether two objects of kind k are equal but for what
// servers maintain: revision, timestamps and the count.
func sameContent(k kinds.Kind, a, b *unyov1.Object) bool {
	strip := func(o *unyov1.Object) proto.Message {
		m := proto.Clone(kinds.Message(o))
		fields := m.ProtoReflect().Descriptor().Fields()
		for _, name := range []protoreflect.Name{"revision", "created_at", "updated_at", k.Count} {
			if f := fields.ByName(name); name != "" && f != nil {
				m.ProtoReflect().Clear(f)
			}
		}
		return m
	}
	return proto.Equal(strip(a), strip(b))
}

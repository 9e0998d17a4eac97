package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/lb_types"
	"go.fd.io/govpp/binapi/vpe"
	"go.fd.io/govpp/core"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/unyo-ops/unyo/plugins/provider-vpp/vppaddr"
)

// replyTimeout bounds each binary API call: a VPP that accepted the
// connection but does not answer is as unavailable as one that is gone.
const replyTimeout = 3 * time.Second

// vppClient is the one connection to VPP's binary API socket. It connects
// on first use and again after any transport failure, so a VPP that
// restarts is picked up by the next call. Calls are serialized: a govpp
// channel is not safe for concurrent use, and VPP handles API messages
// one at a time anyway.
type vppClient struct {
	socket string
	// conf is sent (lb_conf) after each connect; nil sends none.
	conf *lb.LbConf

	mu   sync.Mutex
	conn *core.Connection
	ch   api.Channel
}

func init() {
	// govpp logs through logrus. Its warnings repeat what the plugin
	// reports itself (a failed send is an Unavailable error); only its
	// errors reach stderr, which the host relays.
	quiet := logrus.New()
	quiet.SetLevel(logrus.ErrorLevel)
	quiet.SetOutput(os.Stderr)
	core.SetLogger(quiet)
	socketclient.SetLogger(quiet)
}

// unavailable is the gRPC error for a VPP that cannot be reached, naming
// the socket, so that an operator sees where the plugin looked.
func (c *vppClient) unavailable(err error) error {
	return status.Errorf(codes.Unavailable, "VPP binary API at %s is unavailable: %v", c.socket, err)
}

// do runs fn on a connected channel. A transport failure drops the
// connection (the next call reconnects) and comes back as Unavailable; a
// retval from VPP comes back as fn returned it.
func (c *vppClient) do(ctx context.Context, fn func(api.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		if err := c.connect(); err != nil {
			return c.unavailable(err)
		}
	}
	err := fn(c.ch)
	var ve api.VPPApiError
	if err != nil && !errors.As(err, &ve) {
		c.dropLocked()
		return c.unavailable(err)
	}
	return err
}

func (c *vppClient) connect() error {
	conn, err := core.Connect(socketclient.NewVppClient(c.socket))
	if err != nil {
		return err
	}
	ch, err := conn.NewAPIChannel()
	if err != nil {
		conn.Disconnect()
		return err
	}
	ch.SetReplyTimeout(replyTimeout)
	if err := ch.CheckCompatiblity(lb.AllMessages()...); err != nil {
		ch.Close()
		conn.Disconnect()
		return fmt.Errorf("VPP answers but its lb plugin is missing or of another API version (govpp binapi lb %s): %w", lb.APIVersion, err)
	}
	if c.conf != nil {
		if err := ch.SendRequest(c.conf).ReceiveReply(&lb.LbConfReply{}); err != nil {
			ch.Close()
			conn.Disconnect()
			return fmt.Errorf("lb_conf: %w", err)
		}
	}
	c.conn, c.ch = conn, ch
	return nil
}

func (c *vppClient) dropLocked() {
	if c.ch != nil {
		c.ch.Close()
		c.conn.Disconnect()
		c.conn, c.ch = nil, nil
	}
}

// Close ends the connection.
func (c *vppClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked()
}

// version asks show_version.
func (c *vppClient) version(ctx context.Context) (*vpe.ShowVersionReply, error) {
	r := &vpe.ShowVersionReply{}
	err := c.do(ctx, func(ch api.Channel) error { return ch.SendRequest(&vpe.ShowVersion{}).ReceiveReply(r) })
	return r, err
}

// table dumps every VIP and its ASes.
func (c *vppClient) table(ctx context.Context) (map[vppaddr.VIPKey]*haveVIP, error) {
	out := map[vppaddr.VIPKey]*haveVIP{}
	key := func(v lb_types.LbVip) vppaddr.VIPKey {
		return vppaddr.VIPKey{Prefix: vppaddr.PrefixOf(v.Pfx), Protocol: uint8(v.Protocol), Port: v.Port}
	}
	err := c.do(ctx, func(ch api.Channel) error {
		clear(out)
		err := dump(ch, &lb.LbVipDump{}, func(d *lb.LbVipDetails) {
			k := key(d.Vip)
			out[k] = &haveVIP{Spec: vipSpec{Key: k, Encap: d.Encap, Dscp: uint8(d.Dscp), TargetPort: d.TargetPort}, ASes: map[netip.Addr]bool{}}
		})
		if err != nil {
			return err
		}
		// A zero prefix dumps the ASes of every VIP.
		return dump(ch, &lb.LbAsDump{}, func(d *lb.LbAsDetails) {
			if v := out[key(d.Vip)]; v != nil {
				v.ASes[vppaddr.Addr(d.AppSrv)] = d.Flags&asFlagUsed != 0
			}
		})
	})
	return out, err
}

// dump sends a dump request and hands each details message to each.
func dump[D any, PD interface {
	*D
	api.Message
}](ch api.Channel, req api.Message, each func(PD)) error {
	mr := ch.SendMultiRequest(req)
	for {
		d := PD(new(D))
		last, err := mr.ReceiveReply(d)
		if err != nil {
			return fmt.Errorf("%s: %w", req.GetMessageName(), err)
		}
		if last {
			return nil
		}
		each(d)
	}
}

// asFlagUsed is LB_AS_FLAGS_USED: new flows may go to the AS.
const asFlagUsed = 1

// flowTableLength is new_flows_table_length, VPP's default (a power of 2).
const flowTableLength = 1024

// apply makes the calls; the first refusal stops it, naming the call and
// VPP's answer.
func (c *vppClient) apply(ctx context.Context, ops []op) error {
	for _, o := range ops {
		var err error
		switch o.Kind {
		case opAddVIP, opDelVIP:
			req := &lb.LbAddDelVip{Pfx: vppaddr.Prefix(o.Spec.Key.Prefix), Protocol: o.Spec.Key.Protocol, Port: o.Spec.Key.Port,
				Encap: o.Spec.Encap, Dscp: o.Spec.Dscp, TargetPort: o.Spec.TargetPort, NewFlowsTableLength: flowTableLength, IsDel: o.Kind == opDelVIP}
			err = c.do(ctx, func(ch api.Channel) error { return ch.SendRequest(req).ReceiveReply(&lb.LbAddDelVipReply{}) })
		default:
			req := &lb.LbAddDelAs{Pfx: vppaddr.Prefix(o.Spec.Key.Prefix), Protocol: o.Spec.Key.Protocol, Port: o.Spec.Key.Port,
				AsAddress: vppaddr.Address(o.AS), IsDel: o.Kind == opDelAS, IsFlush: false}
			err = c.do(ctx, func(ch api.Channel) error { return ch.SendRequest(req).ReceiveReply(&lb.LbAddDelAsReply{}) })
		}
		var ve api.VPPApiError
		if errors.As(err, &ve) {
			return status.Errorf(codes.FailedPrecondition, "VPP refused to %s: %v", o, ve)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

package vpptest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/lb"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/vpe"
	"go.fd.io/govpp/codec"
)

// sockclntCreateID is the one message id a client knows before it has the
// table: govpp's socketclient and VPP's own clients hard-code it.
const sockclntCreateID = 15

// Server serves a VPP on a unix socket the way VPP's api socket does:
// 16-byte headers carrying the length, sockclnt_create answered with the
// message table (name_crc → id), then requests answered by context.
type Server struct {
	VPP *VPP
	// Socket is the path to give the plugin as its socket.
	Socket string

	byID   map[uint16]api.Message
	byName map[string]uint16

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
	next  uint32
}

// Start serves vpp on a socket in a fresh temp dir; everything is stopped
// and removed when the test ends.
func Start(t testing.TB, vpp *VPP) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "vpp") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	s, err := Serve(vpp, filepath.Join(dir, "api.sock"))
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	return s
}

// Serve serves vpp on the unix socket at path until Stop.
func Serve(vpp *VPP, path string) (*Server, error) {
	s := &Server{VPP: vpp, Socket: path, byID: map[uint16]api.Message{}, byName: map[string]uint16{}}
	id := uint16(sockclntCreateID + 1)
	for _, msgs := range [][]api.Message{memclnt.AllMessages(), vpe.AllMessages(), lb.AllMessages()} {
		for _, m := range msgs {
			mid := id
			if m.GetMessageName() == (&memclnt.SockclntCreate{}).GetMessageName() {
				mid = sockclntCreateID
			} else {
				id++
			}
			s.byID[mid] = m
			s.byName[m.GetMessageName()+"_"+m.GetCrcString()] = mid
		}
	}
	return s, s.Restart()
}

// Stop closes the socket and every connection and removes the socket
// file, as a VPP that exits does. The tables are kept (see VPP.Reset).
func (s *Server) Stop() {
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	os.Remove(s.Socket)
}

// Restart listens again after Stop.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	os.Remove(s.Socket)
	ln, err := net.Listen("unix", s.Socket)
	if err != nil {
		return fmt.Errorf("fake VPP: %w", err)
	}
	s.ln, s.conns = ln, map[net.Conn]bool{}
	s.wg.Add(1)
	go s.accept(ln)
	return nil
}

func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.ln != ln {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			_ = s.serve(c)
			c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) serve(c net.Conn) error {
	r := bufio.NewReader(c)
	header := make([]byte, 16)
	for {
		if _, err := io.ReadFull(r, header); err != nil {
			return err
		}
		data := make([]byte, binary.BigEndian.Uint32(header[8:12]))
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		if len(data) < 2 {
			return errors.New("short message")
		}
		proto, ok := s.byID[binary.BigEndian.Uint16(data[0:2])]
		if !ok {
			continue // VPP drops messages it has no handler for
		}
		msg := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(api.Message)
		if err := codec.DefaultCodec.DecodeMsg(data, msg); err != nil {
			return err
		}
		var replies []api.Message
		var context uint32
		switch m := msg.(type) {
		case *memclnt.SockclntCreate:
			replies = []api.Message{s.created()}
		case *memclnt.SockclntDelete:
			if err := s.write(c, &memclnt.SockclntDeleteReply{}, 0); err != nil {
				return err
			}
			return nil
		default:
			context, _ = codec.DefaultCodec.DecodeMsgContext(data, m.GetMessageType())
			replies = s.VPP.Handle(m)
		}
		for _, rep := range replies {
			if err := s.write(c, rep, context); err != nil {
				return err
			}
		}
	}
}

func (s *Server) created() *memclnt.SockclntCreateReply {
	s.mu.Lock()
	s.next++
	idx := s.next
	s.mu.Unlock()
	rep := &memclnt.SockclntCreateReply{Index: idx}
	for name, id := range s.byName {
		rep.MessageTable = append(rep.MessageTable, memclnt.MessageTableEntry{Index: id, Name: name})
	}
	rep.Count = uint16(len(rep.MessageTable))
	return rep
}

func (s *Server) write(c net.Conn, m api.Message, context uint32) error {
	id, ok := s.byName[m.GetMessageName()+"_"+m.GetCrcString()]
	if !ok {
		return fmt.Errorf("fake VPP has no id for %s", m.GetMessageName())
	}
	data, err := codec.DefaultCodec.EncodeMsg(m, id)
	if err != nil {
		return err
	}
	if m.GetMessageType() == api.ReplyMessage && len(data) >= 6 {
		binary.BigEndian.PutUint32(data[2:6], context)
	}
	frame := make([]byte, 16+len(data))
	binary.BigEndian.PutUint32(frame[8:12], uint32(len(data)))
	copy(frame[16:], data)
	_, err = c.Write(frame)
	return err
}

package spool_test

import (
	"context"
	"fmt"
	"os"

	"github.com/unyo-ops/unyo/core/spool"
)

// The agent appends what it sends; a sender goroutine delivers it in order
// and acknowledges after the cluster confirmed.
func Example() {
	dir, _ := os.MkdirTemp("", "spool-example")
	defer os.RemoveAll(dir)
	s, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// Producer: each record is, for example, a marshalled protobuf message
	// carrying an idempotency key.
	s.Append([]byte("result 1"), []byte("result 2"))
	s.Append([]byte("result 3"))

	// Sender.
	send := func(records [][]byte) error {
		for _, r := range records {
			fmt.Println("sent", string(r))
		}
		return nil
	}
	ctx := context.Background()
	for s.Stats().PendingRecords > 0 { // a real sender loops until ctx is done
		if err := s.Wait(ctx); err != nil {
			return
		}
		b, err := s.Peek(500, 1<<20)
		if err != nil {
			return
		}
		if err := send(b.Records); err != nil {
			continue // retry later: the same records come back from Peek
		}
		if err := s.Ack(b); err != nil {
			return
		}
	}
	// Output:
	// sent result 1
	// sent result 2
	// sent result 3
}

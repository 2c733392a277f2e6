package move

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// A failed add ends the copy at once: the read of the next batch, under
// way on the old owner, is cut short rather than waited for until its
// deadline. The old owner here answers the first batch and holds the
// second; the new owner refuses the first batch's add.
func TestAFailedAddEndsTheCopyAtOnce(t *testing.T) {
	srcServer, srcClient := net.Pipe()
	dstServer, dstClient := net.Pipe()
	t.Cleanup(func() {
		for _, c := range []net.Conn{srcServer, srcClient, dstServer, dstClient} {
			c.Close()
		}
	})
	go func() {
		r := bufio.NewReader(srcServer)
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
		if _, err := srcServer.Write([]byte("VA 1 f0 t-1 c7\r\nx\r\n")); err != nil {
			return
		}
		_, _ = r.ReadString('\n') // the next batch: never answered
	}()
	go func() {
		r := bufio.NewReader(dstServer)
		for range 2 { // the add and its value
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
		_, _ = dstServer.Write([]byte("SERVER_ERROR out of memory storing object\r\n"))
	}()
	m := &Mover{Batch: 1, Timeout: 20 * time.Second}
	src := &conn{Conn: srcClient, r: bufio.NewReader(srcClient)}
	dst := &conn{Conn: dstClient, r: bufio.NewReader(dstClient)}

	start := time.Now()
	err := m.copyBatches(context.Background(), src, dst, "old", "new", []string{"k0", "k1"}, &CopyResult{Ledger: Ledger{}})
	if err == nil {
		t.Fatal("the copy succeeded; want the add's refusal")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the copy's error came after %s (%v): the read under way was waited for until its deadline", took.Round(time.Second), err)
	}
}

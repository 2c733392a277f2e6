package move

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// copyTo copies the keys of server to their owners (byOwner), counting in
// res: in lanes, each on connections of its own, at most Lanes at once.
// Over TLS each write of a batch waits for its answer (recordBudget), so
// one lane copies a round trip's 15 KiB at a time: the owners, and the
// parts of each one's keys, are copied side by side.
func (m *Mover) copyTo(ctx context.Context, server string, byOwner map[string][]string, res *CopyResult) error {
	total := 0
	for _, keys := range byOwner {
		total += len(keys)
	}
	lanes := cmp.Or(m.Lanes, defaultLanes)
	share := max(m.batch(), (total+lanes-1)/lanes)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(lanes)
	var mu sync.Mutex
	for owner, leaving := range byOwner {
		for part := range chunks(leaving, share) {
			g.Go(func() error {
				conns := m.pool()
				defer conns.close()
				got := CopyResult{Ledger: Ledger{}}
				err := m.copyLane(ctx, conns, server, owner, part, &got)
				// A lane that failed counts the copies it made: they are
				// taken back.
				mu.Lock()
				res.add(got)
				mu.Unlock()
				return err
			})
		}
	}
	return g.Wait()
}

// defaultLanes is Mover.Lanes' default.
const defaultLanes = 4

// copyLane copies keys of server to owner on conns.
func (m *Mover) copyLane(ctx context.Context, conns conns, server, owner string, keys []string, res *CopyResult) error {
	src, err := conns.get(ctx, m, server)
	if err != nil {
		return err
	}
	dst, err := conns.get(ctx, m, owner)
	if err != nil {
		return err
	}
	return m.copyBatches(ctx, src, dst, server, owner, keys, res)
}

// add counts in r the copies of other, a lane's.
func (r *CopyResult) add(other CopyResult) {
	r.Copied += other.Copied
	r.Present += other.Present
	r.Gone += other.Gone
	maps.Copy(r.Ledger, other.Ledger)
}

// read is a batch of keys read from the server that holds them: how many
// were asked for, and the items it still held.
type read struct {
	asked int
	items []item
	err   error
}

// copyBatches copies keys from src (server) to dst (their owner) in
// batches, the next batch read while the last is added: each of a batch's
// keys is read before it is added, as one after the other, and the two
// connections' round trips overlap (over TLS, each add of a batch waits
// for its answer: recordBudget).
func (m *Mover) copyBatches(ctx context.Context, src, dst *conn, server, owner string, keys []string, res *CopyResult) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	reads := make(chan read, 1)
	go func() {
		defer close(reads)
		for batch := range chunks(keys, m.batch()) {
			r := read{asked: len(batch)}
			if r.err = m.wait(ctx, len(batch)); r.err == nil {
				if r.items, r.err = src.get(m.deadline(), batch); r.err != nil {
					r.err = fmt.Errorf("reading from %s: %w", server, r.err)
				}
			}
			select {
			case reads <- r:
			case <-ctx.Done():
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		if err != nil {
			// A failed add stops the reads: the one under way ends at once.
			_ = src.SetDeadline(time.Now())
		}
		for range reads {
		}
	}()
	for r := range reads {
		if r.err != nil {
			return r.err
		}
		res.Gone += r.asked - len(r.items)
		var cas []uint64
		if cas, err = dst.add(m.deadline(), r.items); err != nil {
			return fmt.Errorf("writing to %s: %w", owner, err)
		}
		for i, it := range r.items {
			if cas[i] == 0 {
				res.Present++
				continue
			}
			res.Copied++
			res.Ledger[it.key] = Copied{To: owner, FromCAS: it.cas, ToCAS: cas[i], Sum: it.sum()}
		}
	}
	return nil
}

func (m *Mover) batch() int {
	if m.Batch > 0 {
		return m.Batch
	}
	return 100
}

func (m *Mover) deadline() time.Time {
	if m.Timeout > 0 {
		return time.Now().Add(m.Timeout)
	}
	return time.Now().Add(5 * time.Second)
}

func (m *Mover) wait(ctx context.Context, n int) error {
	if m.Limit == nil {
		return nil
	}
	for n > 0 {
		step := min(n, max(m.Limit.Burst(), 1))
		if err := m.Limit.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// chunks yields s in slices of at most n.
func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			c := s[:min(n, len(s))]
			s = s[len(c):]
			if !yield(c) {
				return
			}
		}
	}
}

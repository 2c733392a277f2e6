package move

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/example/memcached-operator/pkg/ring"
)

// Settle deletes from server every key after puts elsewhere, and the copy
// of each such key that changed on server after ledger recorded it (unless
// the copy changed too).
func (m *Mover) Settle(ctx context.Context, server string, after *ring.Ring, ledger Ledger) (SettleResult, error) {
	var res SettleResult
	leaving, _, err := m.misplaced(ctx, server, after)
	if err != nil {
		return res, err
	}
	conns := m.pool()
	defer conns.close()
	for batch := range chunks(leaving, m.batch()) {
		if err := m.wait(ctx, len(batch)); err != nil {
			return res, err
		}
		if err := m.settleBatch(ctx, conns, server, batch, ledger, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// misplaced lists server's keys and returns those after puts elsewhere,
// and how many it holds in all.
func (m *Mover) misplaced(ctx context.Context, server string, after *ring.Ring) ([]listed, int, error) {
	keys, err := m.list(ctx, server)
	if err != nil {
		return nil, 0, err
	}
	var out []listed
	for _, k := range keys {
		// A key memcached takes on no command line (stored through the
		// binary protocol, of more than 186 bytes, with a space or a
		// control byte) can be neither read, copied nor deleted: it stays.
		if after.Server(k.key) != server && speakable(k.key) {
			out = append(out, k)
		}
	}
	return out, len(keys), nil
}

// settleBatch deletes batch, keys server lists that belong elsewhere, from
// server, counting in res what became of each.
func (m *Mover) settleBatch(ctx context.Context, conns conns, server string, batch []listed, ledger Ledger, res *SettleResult) error {
	src, err := conns.get(ctx, m, server)
	if err != nil {
		return err
	}
	// Keys copied and unchanged since are deleted only as they were
	// (their CAS): one written between the listing and now is found
	// changed, as one changed before the listing is.
	dels, err := deletions(m, src, batch, ledger, res)
	if err != nil {
		return fmt.Errorf("reading from %s: %w", server, err)
	}
	deleted, err := deleteListed(m, src, dels, ledger)
	if err != nil {
		return fmt.Errorf("deleting from %s: %w", server, err)
	}
	var again []casKey
	invalid := map[string][]casKey{}
	for i, k := range batch {
		c, copied := ledger[k.key]
		switch {
		case !copied:
			res.Uncopied++
		case dels[i].cas != 0 && deleted[i]:
			res.Removed++
		default:
			// Written on this server after its copy: the copy is older
			// than that write.
			if dels[i].cas != 0 {
				again = append(again, casKey{key: k.key})
			}
			invalid[c.To] = append(invalid[c.To], casKey{key: k.key, cas: c.ToCAS})
			res.Invalidated++
		}
	}
	if len(again) > 0 {
		if _, err := src.delete(m.deadline(), again); err != nil {
			return fmt.Errorf("deleting from %s: %w", server, err)
		}
	}
	for owner, copies := range invalid {
		dst, err := conns.get(ctx, m, owner)
		if err != nil {
			return err
		}
		if _, err := m.deleteCopies(dst, copies, ledger); err != nil {
			return fmt.Errorf("deleting from %s: %w", owner, err)
		}
	}
	return nil
}

// deletions are the deletes of batch from src: each key copied and as
// copied since (its CAS, or, where memcached moved it, what it holds) only
// while it is so; the others whatever they hold.
func deletions(m *Mover, src *conn, batch []listed, ledger Ledger, res *SettleResult) ([]casKey, error) {
	var moved []string
	for _, k := range batch {
		if c, copied := ledger[k.key]; copied && c.FromCAS != k.cas {
			moved = append(moved, k.key)
		}
	}
	// A key whose CAS changed holds what was copied still when memcached
	// only moved it (its slab rebalancer): as copied, at its new CAS.
	same, present, err := unchanged(m, src, moved, ledger)
	if err != nil {
		return nil, err
	}
	res.Gone += len(moved) - present
	res.Rewritten += present - len(same)
	dels := make([]casKey, len(batch))
	for i, k := range batch {
		dels[i] = casKey{key: k.key}
		if c, copied := ledger[k.key]; copied && c.FromCAS == k.cas {
			dels[i].cas = k.cas
		} else if cas, ok := same[k.key]; ok {
			dels[i].cas = cas
		}
	}
	return dels, nil
}

// deleteCopies deletes copies from dst, each while it is as copied: at the
// CAS the ledger recorded, or, where memcached moved it since (a new CAS),
// while it holds what was copied. It tells how many it deleted.
func (m *Mover) deleteCopies(dst *conn, copies []casKey, ledger Ledger) (int, error) {
	deleted, err := dst.delete(m.deadline(), copies)
	if err != nil {
		return 0, err
	}
	n := 0
	var failed []string
	for i, d := range deleted {
		if d {
			n++
		} else {
			failed = append(failed, copies[i].key)
		}
	}
	later, err := retryMoved(m, dst, failed, ledger)
	return n + len(later), err
}

// deleteListed deletes dels from src, and tells of each whether it did:
// one whose CAS memcached changed since by moving it is deleted at its CAS
// now (retryMoved).
func deleteListed(m *Mover, src *conn, dels []casKey, ledger Ledger) ([]bool, error) {
	deleted, err := src.delete(m.deadline(), dels)
	if err != nil {
		return nil, err
	}
	var failed []string
	for i, d := range dels {
		if d.cas != 0 && !deleted[i] {
			failed = append(failed, d.key)
		}
	}
	later, err := retryMoved(m, src, failed, ledger)
	for i, d := range dels {
		deleted[i] = deleted[i] || later[d.key]
	}
	return deleted, err
}

// casTries bounds how often a key memcached moved is deleted again: it may
// move it again between the read and the delete.
const casTries = 3

// retryMoved deletes from c those of keys, whose delete at the CAS they had
// failed, that still hold what ledger says was copied (memcached moved
// them: a new CAS), at their CAS now, up to casTries times; and returns
// those it deleted.
func retryMoved(m *Mover, c *conn, keys []string, ledger Ledger) (map[string]bool, error) {
	out := map[string]bool{}
	for range casTries {
		same, _, err := unchanged(m, c, keys, ledger)
		if err != nil || len(same) == 0 {
			return out, err
		}
		again := make([]casKey, 0, len(same))
		for key, cas := range same {
			again = append(again, casKey{key: key, cas: cas})
		}
		deleted, err := c.delete(m.deadline(), again)
		if err != nil {
			return out, err
		}
		keys = keys[:0]
		for i, d := range deleted {
			if d {
				out[again[i].key] = true
			} else {
				keys = append(keys, again[i].key)
			}
		}
	}
	return out, nil
}

// unchanged reads keys from c and returns, by key, the CAS of those that
// hold what ledger says was copied (its digest): moved by memcached since,
// not written; and how many of keys c holds.
func unchanged(m *Mover, c *conn, keys []string, ledger Ledger) (map[string]uint64, int, error) {
	if len(keys) == 0 {
		return nil, 0, nil
	}
	items, err := c.get(m.deadline(), keys)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]uint64{}
	for _, it := range items {
		if it.sum() == ledger[it.key].Sum {
			out[it.key] = it.cas
		}
	}
	return out, len(items), nil
}

// Undo deletes from its new owner each copy ledger records, while it is as
// copied (its CAS), and tells how many it deleted: a copy a client changed
// since is the client's.
func (m *Mover) Undo(ctx context.Context, ledger Ledger) (int, error) {
	byOwner := map[string][]casKey{}
	for key, c := range ledger {
		byOwner[c.To] = append(byOwner[c.To], casKey{key: key, cas: c.ToCAS})
	}
	conns := m.pool()
	defer conns.close()
	n := 0
	for owner, copies := range byOwner {
		dst, err := conns.get(ctx, m, owner)
		if err != nil {
			return n, err
		}
		for batch := range chunks(copies, m.batch()) {
			if err := m.wait(ctx, len(batch)); err != nil {
				return n, err
			}
			deleted, err := m.deleteCopies(dst, batch, ledger)
			n += deleted
			if err != nil {
				return n, fmt.Errorf("deleting from %s: %w", owner, err)
			}
		}
	}
	return n, nil
}

// sum is a digest of what a copy of it holds: its value and flags.
func (it item) sum() uint64 {
	h := fnv.New64a()
	h.Write(it.value)
	h.Write([]byte{byte(it.flags >> 24), byte(it.flags >> 16), byte(it.flags >> 8), byte(it.flags)})
	return h.Sum64()
}

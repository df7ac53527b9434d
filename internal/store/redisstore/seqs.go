package redisstore

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"
)

// An instance takes seqs from P:seq in blocks (seqScript hands out a
// block as it handed out one put's seqs before) and gives them to its
// puts from memory, so a put costs Redis no TIME, GET and SET of the
// counter (issue 31: those were a fifth of the one-node put script), and
// on a Cluster the master that holds P:seq serves one script per block,
// not one per put, so the puts' Redis CPU spreads over the masters.
//
// Seqs stay unique (every block is a range no other block shares) and
// grow within an instance (it takes a new block only past its current
// one, and seqScript never hands out less than it did). Across instances
// a job put later may get a smaller seq than one put earlier through
// another instance, for at most seqBlockAge: an instance drops a block
// older than that, so the serving order of a priority is put order to
// within seqBlockAge. Each block moves the counter seqBlock ahead, while
// the clock under it moves a million a second: an instance takes at most
// 1/seqBlockAge blocks a second at low rates, so the counter keeps to the
// clock (seqScript's rule) up to hundreds of thousands of puts a second.
//
// On a Cluster a group of puts of one master takes its seqs with
// takeSeqsOn: still in order from the same block, but only those whose
// seq group's entry hash is on that master (keys.go: seqShard), so the
// put's script there writes the entries too (masterput.go).

// seqBlock is how many seqs an instance takes at a time.
const seqBlock = 1024

// seqBlockAge is how long an instance hands out seqs of one block.
const seqBlockAge = 50 * time.Millisecond

// seqBlocks is an instance's current block.
type seqBlocks struct {
	mu   sync.Mutex
	next uint64    // guarded by mu: the next seq to hand out
	left int       // guarded by mu: how many are left from next
	at   time.Time // guarded by mu: when the block was taken
}

// takeSeqs hands out n consecutive seqs and returns the first.
func (s *Store) takeSeqs(ctx context.Context, n int) (uint64, error) {
	b := &s.seqs
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < n || time.Since(b.at) >= seqBlockAge {
		if err := s.newSeqBlock(ctx, n); err != nil {
			return 0, err
		}
	}
	first := b.next
	b.next += uint64(n)
	b.left -= n
	return first, nil
}

// takeSeqsOn hands out n seqs in ascending order, each in a seq group
// whose shard is on master by the slot map where the next runs of the
// block have one (keys.go: seqShard), so the put's script on master
// writes their entries too (masterput.go). The seqs of the runs it
// passes over are never handed out: about two runs per group of puts on
// three masters (a seq group's tag is on a given master one time in
// three), so the counter moves a few times faster than the puts, still
// far below the million a second of the clock it keeps to. When no
// group is on master (or the map is not read yet) it passes over none,
// and the seq entries go to another master first, as before format 3.
func (s *Store) takeSeqsOn(ctx context.Context, n int, master string) ([]uint64, error) {
	groups := s.seqGroupMasters()
	if groups != nil && !slices.Contains(groups[:], master) {
		groups = nil
	}
	b := &s.seqs
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.at) >= seqBlockAge {
		b.left = 0
	}
	seqs := make([]uint64, 0, n)
	passed := 0 // runs passed over for the seq being chosen
	for len(seqs) < n {
		if b.left == 0 {
			if err := s.newSeqBlock(ctx, n-len(seqs)); err != nil {
				return nil, err
			}
		}
		seq := b.next
		// passed only bounds the search: seqGroups runs in a row hold
		// every group, master's too.
		if groups != nil && s.k.inGroups(seq) && passed < seqGroups && groups[seqGroup(seq)] != master {
			pass := min(seqRun-seq%seqRun, uint64(b.left))
			b.next += pass
			b.left -= int(pass)
			passed++
			continue
		}
		seqs = append(seqs, seq)
		b.next++
		b.left--
		passed = 0
	}
	return seqs, nil
}

// newSeqBlock takes a new block of at least n seqs; b.mu is held.
func (s *Store) newSeqBlock(ctx context.Context, n int) error {
	b := &s.seqs
	size := max(n, seqBlock)
	last, err := seqScript.Exec(ctx, s.c, []string{s.k.seqCounter()}, []string{strconv.Itoa(size)}).AsInt64()
	if err != nil {
		return unavailable("put: seq", err)
	}
	b.next, b.left, b.at = uint64(last)-uint64(size)+1, size, time.Now()
	return nil
}

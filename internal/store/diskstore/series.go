package diskstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/internal/store"
)

var _ store.SeriesStore = (*Store)(nil)

// Series keys (store.SeriesStore), one per topic, resolution and bucket:
//
//	Z<step s: 2 bytes><epoch: 8 bytes><topic>\x00<bucket start s: 8 bytes> -> bucket (encodeBucket)
//
// An epoch is Keep/24 of its resolution (an hour of 10-second buckets,
// seven hours of one-minute ones), numbered from the Unix epoch; the
// epoch leads the key so that expiry is one range delete of every epoch
// wholly past Keep, whatever the series hold and however many topics
// wrote them, and a topic's read is one short scan per epoch it spans
// (25 for a day of 10-second buckets). A bucket outlives its Keep on disk
// by at most one epoch; reads leave it out from Keep on. Times are
// seconds, signed, mapped by sortable.
const seriesEpochs = 24 // epochs per Keep

// seriesState serialises series writes (read, merge, write back) and
// remembers, per resolution, the first epoch not yet deleted, so expiry
// runs once per epoch rather than on every write.
type seriesState struct {
	mu     sync.Mutex
	pruned map[time.Duration]int64 // step -> epochs below this are deleted; guarded by mu
}

func seriesEpochLen(r store.SeriesResolution) int64 {
	return int64(r.Keep/seriesEpochs) / int64(time.Second)
}

// seriesEpoch is the epoch of the bucket starting at start (floor).
func seriesEpoch(r store.SeriesResolution, start int64) int64 {
	n := seriesEpochLen(r)
	e := start / n
	if start%n < 0 {
		e--
	}
	return e
}

// seriesEpochPrefix is Z<step><epoch>.
func seriesEpochPrefix(r store.SeriesResolution, epoch int64) []byte {
	k := make([]byte, 0, 11)
	k = append(k, prefixSeries)
	k = binary.BigEndian.AppendUint16(k, uint16(r.Step/time.Second))
	return binary.BigEndian.AppendUint64(k, sortable(epoch))
}

// seriesTopicPrefix is Z<step><epoch><topic>\x00.
func seriesTopicPrefix(r store.SeriesResolution, epoch int64, topic string) []byte {
	k := append(seriesEpochPrefix(r, epoch), topic...)
	return append(k, 0)
}

func seriesKey(r store.SeriesResolution, topic string, start int64) []byte {
	k := seriesTopicPrefix(r, seriesEpoch(r, start), topic)
	return binary.BigEndian.AppendUint64(k, sortable(start))
}

// seriesFormat is the first byte of an encoded bucket.
const seriesFormat = 1

// encodeBucket writes b as uvarints: the four gauges, the three
// counters, the maximum lateness in ns, the number of lateness buckets
// used, then (index, count) pairs by index: about 15 bytes for a quiet
// bucket, a few more per lateness bucket a busy one fills.
func encodeBucket(b *store.SeriesBucket) []byte {
	v := make([]byte, 0, 24+4*len(b.Lateness))
	v = append(v, seriesFormat)
	for _, n := range []int{b.Ready, b.Delayed, b.Reserved, b.Buried, b.Fires, b.Finishes, b.Failures, int(b.LatenessMax)} {
		v = binary.AppendUvarint(v, uint64(n))
	}
	idx := make([]int, 0, len(b.Lateness))
	for i, n := range b.Lateness {
		if n > 0 {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	v = binary.AppendUvarint(v, uint64(len(idx)))
	for _, i := range idx {
		v = binary.AppendUvarint(v, uint64(i))
		v = binary.AppendUvarint(v, uint64(b.Lateness[i]))
	}
	return v
}

var errBadBucket = errors.New("series bucket does not decode")

func decodeBucket(start int64, v []byte) (store.SeriesBucket, error) {
	b := store.SeriesBucket{At: time.Unix(start, 0).UTC()}
	if len(v) == 0 || v[0] != seriesFormat {
		return b, errBadBucket
	}
	r := bytes.NewReader(v[1:])
	var nums [9]uint64
	for i := range nums {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > 1<<62 {
			return b, errBadBucket
		}
		nums[i] = n
	}
	b.Ready, b.Delayed, b.Reserved, b.Buried = int(nums[0]), int(nums[1]), int(nums[2]), int(nums[3])
	b.Fires, b.Finishes, b.Failures = int(nums[4]), int(nums[5]), int(nums[6])
	b.LatenessMax = time.Duration(nums[7])
	if nums[8] > store.SeriesLatenessBuckets {
		return b, errBadBucket
	}
	for range nums[8] {
		i, err1 := binary.ReadUvarint(r)
		n, err2 := binary.ReadUvarint(r)
		if err1 != nil || err2 != nil || i >= store.SeriesLatenessBuckets || n > 1<<62 {
			return b, errBadBucket
		}
		if b.Lateness == nil {
			b.Lateness = make(map[int]int, nums[8])
		}
		b.Lateness[int(i)] = int(n)
	}
	return b, nil
}

// AddSeries implements store.SeriesStore: for each sample and resolution
// a read of the bucket, the merge and a write back, all in one batch, with the range delete of any epoch
// that expired since the last write; one durable commit (durable.go).
func (s *Store) AddSeries(ctx context.Context, at time.Time, samples []store.SeriesSample) error {
	for _, smp := range samples {
		if err := smp.Check(); err != nil {
			return err
		}
	}
	return s.outside(ctx, true, func() error {
		s.series.mu.Lock()
		defer s.series.mu.Unlock()
		if s.series.pruned == nil {
			s.series.pruned = make(map[time.Duration]int64)
		}
		b := s.db.NewBatch()
		defer b.Close()
		pruned := make(map[time.Duration]int64)
		for _, r := range store.SeriesResolutions {
			// every epoch wholly before at-Keep holds only expired buckets
			cut := seriesEpoch(r, store.SeriesBucketStart(at.Add(-r.Keep), r.Step))
			if done, ok := s.series.pruned[r.Step]; !ok || cut > done {
				if err := b.DeleteRange(seriesEpochPrefix(r, -1<<62), seriesEpochPrefix(r, cut), nil); err != nil {
					return unavailable("expire series", err)
				}
				pruned[r.Step] = cut
			}
			start := store.SeriesBucketStart(at, r.Step)
			if seriesEpoch(r, start) < max(s.series.pruned[r.Step], pruned[r.Step]) {
				continue // expired before it is written: its epoch is deleted already and would not be again
			}
			for _, smp := range samples {
				key := seriesKey(r, smp.Topic, start)
				cur := store.SeriesBucket{At: time.Unix(start, 0).UTC()}
				v, closer, err := s.db.Get(key)
				switch {
				case err == nil:
					cur, err = decodeBucket(start, v)
					closer.Close()
					if err != nil { // start the bucket afresh rather than fail every later write into it
						s.log.Warn("series bucket unreadable; starting it again", "topic", smp.Topic, "at", cur.At, "err", err)
						cur = store.SeriesBucket{At: time.Unix(start, 0).UTC()}
					}
				case !errors.Is(err, pebble.ErrNotFound):
					return unavailable("read series", err)
				}
				cur.Merge(smp)
				if err := b.Set(key, encodeBucket(&cur), nil); err != nil {
					return unavailable("write series", err)
				}
			}
		}
		// Durable (durable.go): Pebble keeps an unsynced write in its own
		// buffer until a later sync, so an idle server's kill -9 would
		// lose it, and a power loss anything not fdatasynced. One fsync
		// per sample, for every topic at once, every 10 s.
		if err := s.commitDurable(b); err != nil {
			return unavailable("write series", err)
		}
		for step, cut := range pruned {
			s.series.pruned[step] = cut
		}
		return nil
	})
}

// ReadSeries implements store.SeriesStore: one bounded scan of the topic's
// keys in each epoch the range spans.
func (s *Store) ReadSeries(ctx context.Context, p store.SeriesReadParams) (out []store.SeriesBucket, err error) {
	r, first, last, err := store.SeriesBounds(p)
	if err != nil {
		return nil, err
	}
	out = []store.SeriesBucket{}
	if first > last {
		return out, nil
	}
	err = s.outside(ctx, false, func() error {
		for e := seriesEpoch(r, first); e <= seriesEpoch(r, last); e++ {
			pre := seriesTopicPrefix(r, e, p.Topic)
			lo := binary.BigEndian.AppendUint64(bytes.Clone(pre), sortable(first))
			hi := binary.BigEndian.AppendUint64(bytes.Clone(pre), sortable(last)+1)
			it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
			if err != nil {
				return unavailable("read series", err)
			}
			for it.First(); it.Valid(); it.Next() {
				k := it.Key()
				if len(k) != len(pre)+8 {
					continue
				}
				start := int64(binary.BigEndian.Uint64(k[len(pre):]) ^ (1 << 63))
				b, err := decodeBucket(start, it.Value())
				if err != nil {
					it.Close()
					return unavailable(fmt.Sprintf("read series of %q", p.Topic), err)
				}
				out = append(out, b)
			}
			if err := it.Close(); err != nil {
				return unavailable("read series", err)
			}
		}
		return nil
	})
	return out, err
}

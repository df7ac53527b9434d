package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq/internal/store"
)

var _ store.DocStore = (*Store)(nil)

// saveDocScript is SaveDoc's compare-and-set: KEYS[1] the document's hash,
// KEYS[2] its kind's name set; ARGV: prev rev ("0" = must not exist), new
// rev, data, name. It answers 1 when it wrote.
var saveDocScript = rueidis.NewLuaScript(`
local cur = redis.call('HGET', KEYS[1], 'rev') or '0'
if cur ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'data', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
return 1
`)

// deleteDocScript removes a document and its name; 0 when there was none.
var deleteDocScript = rueidis.NewLuaScript(`
redis.call('SREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
`)

// decodeDoc reads a document's hash (rev, data) as HMGET returned it; ok
// is false when the hash is gone.
func decodeDoc(name string, m rueidis.RedisResult) (d *store.Doc, ok bool, err error) {
	vals, err := m.ToArray()
	if err != nil {
		return nil, false, err
	}
	if len(vals) != 2 || vals[0].IsNil() {
		return nil, false, nil
	}
	revS, err := vals[0].ToString()
	if err != nil {
		return nil, false, err
	}
	data, err := vals[1].ToString()
	if err != nil {
		return nil, false, err
	}
	rev, err := strconv.ParseUint(revS, 10, 64)
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: document %q: bad rev %q", name, revS)
	}
	return &store.Doc{Name: name, Rev: rev, Data: []byte(data)}, true, nil
}

func (s *Store) docGet(kind, name string) rueidis.Completed {
	return s.c.B().Hmget().Key(s.k.doc(kind, name)).Field("rev", "data").Build()
}

// GetDoc implements store.DocStore.
func (s *Store) GetDoc(ctx context.Context, kind, name string) (*store.Doc, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	d, ok, err := decodeDoc(name, s.c.Do(ctx, s.docGet(kind, name)))
	if err != nil {
		return nil, unavailable("get "+kind, err)
	}
	if !ok {
		return nil, fmt.Errorf("redisstore: %s %q: %w", kind, name, store.ErrDocNotFound)
	}
	return d, nil
}

// ListDocs implements store.DocStore: the name set, then every document in
// one pipeline. A name whose document is gone (deleted between the two
// reads) is left out.
func (s *Store) ListDocs(ctx context.Context, kind string) ([]*store.Doc, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	names, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.k.docNames(kind)).Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("list "+kind, err)
	}
	sort.Strings(names)
	out := make([]*store.Doc, 0, len(names))
	if len(names) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, 0, len(names))
	for _, n := range names {
		cmds = append(cmds, s.docGet(kind, n))
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		d, ok, err := decodeDoc(names[i], r)
		if err != nil {
			return nil, unavailable("list "+kind, err)
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// SaveDoc implements store.DocStore with one script.
func (s *Store) SaveDoc(ctx context.Context, kind string, d *store.Doc, prev uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	var n int64
	var serr error
	err := s.acked(ctx, "save "+kind, func(c rueidis.Client) error {
		n, serr = saveDocScript.Exec(ctx, c, []string{s.k.doc(kind, d.Name), s.k.docNames(kind)},
			[]string{strconv.FormatUint(prev, 10), strconv.FormatUint(d.Rev, 10), string(d.Data), d.Name}).AsInt64()
		return serr
	})
	if serr != nil {
		return unavailable("save "+kind, serr)
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("redisstore: %s %q: %w", kind, d.Name, store.ErrDocConflict)
	}
	return nil
}

// DeleteDoc implements store.DocStore.
func (s *Store) DeleteDoc(ctx context.Context, kind, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	var n int64
	var serr error
	err := s.acked(ctx, "delete "+kind, func(c rueidis.Client) error {
		n, serr = deleteDocScript.Exec(ctx, c, []string{s.k.doc(kind, name), s.k.docNames(kind)}, []string{name}).AsInt64()
		return serr
	})
	if serr != nil {
		return unavailable("delete "+kind, serr)
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("redisstore: %s %q: %w", kind, name, store.ErrDocNotFound)
	}
	return nil
}

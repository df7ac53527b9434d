package redisstore

import (
	"slices"
	"strings"
	"testing"
)

// FuzzUnpackRecord: the packed-record decoder never panics, whatever the
// bytes, and a record packed as the put scripts pack it (appendPacked,
// every form of str length) reads back field for field.
func FuzzUnpackRecord(f *testing.F) {
	f.Add([]byte{0x80}, "id", "a")
	f.Add(appendPacked(nil, []string{"id", "x", "body", strings.Repeat("b", 100)}, 0), "body", strings.Repeat("c", 300))
	f.Add([]byte{0xde, 0x00, 0x01, 0xa1, 'a', 0xcd, 0x01, 0x00}, "a", "")
	f.Add([]byte{0x81, 0xa1, 'n', 0xcb, 0x40, 0x59, 0, 0, 0, 0, 0, 0}, strings.Repeat("k", 40), strings.Repeat("v", 70000))
	f.Fuzz(func(t *testing.T, raw []byte, k, v string) {
		_, _ = unpackRecord(raw) // must not panic
		kv := []string{"id", k, k, v, "body", v + k}
		got, err := unpackRecord(appendPacked(nil, kv, 0))
		if err != nil || !slices.Equal(got, kv) {
			t.Fatalf("unpackRecord(appendPacked(%q)) = %q, %v", kv, got, err)
		}
		// A header that counts entries the bytes do not hold is an error.
		if _, err := unpackRecord(appendPacked(nil, kv, 1)); err == nil {
			t.Fatal("a record one entry short read without error")
		}
	})
}

package redisstore

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// A job record of key layout 2 is one Redis string: a MessagePack map
// from field name to value (jobFields' names, every value a string),
// the format Redis's Lua writes and reads with cmsgpack.pack and
// cmsgpack.unpack. One string instead of a hash of about 22 fields: a
// 100-byte body made the hash a hashtable (values over
// hash-max-listpack-value, 64 B), whose HSET, HGETALL and DEL cost Redis
// several times a string's SET, GET and DEL (issue 31, docs/benchmarks.md).
// Go packs a new record (appendPacked) and reads what the scripts answer
// (unpackRecord); the scripts unpack, change and pack it again.

// maxPackedFields bounds the fields unpackRecord accepts: a record has
// about 30, so a larger count is a corrupt or foreign value.
const maxPackedFields = 1024

// appendMapHeader appends the header of a MessagePack map of n entries.
func appendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

// appendStr appends s as a MessagePack str, in the smallest form, as
// cmsgpack does.
func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// appendPacked appends a map of the field/value pairs kv plus extra
// entries the caller (or the script) appends after them.
func appendPacked(b []byte, kv []string, extra int) []byte {
	b = appendMapHeader(b, len(kv)/2+extra)
	for _, s := range kv {
		b = appendStr(b, s)
	}
	return b
}

var errPacked = errors.New("malformed packed record")

// unpackRecord reads a packed record into field/value pairs. Keys must
// be strings; values may be strings, integers or floats (a script that
// stored a Lua number), which read as their decimal form, or nil and
// booleans, which read as "" and "1"/"". Anything else, a truncated value
// or bytes after the map is an error; it never panics.
func unpackRecord(b []byte) ([]string, error) {
	d := unpacker{b: b}
	n, ok := d.mapLen()
	if !ok || n > maxPackedFields {
		return nil, errPacked
	}
	kv := make([]string, 0, 2*n)
	for i := 0; i < n; i++ {
		k, ok := d.str()
		if !ok {
			return nil, errPacked
		}
		v, ok := d.value()
		if !ok {
			return nil, errPacked
		}
		kv = append(kv, k, v)
	}
	if len(d.b) != 0 {
		return nil, errPacked
	}
	return kv, nil
}

type unpacker struct{ b []byte }

func (d *unpacker) take(n int) ([]byte, bool) {
	if n < 0 || n > len(d.b) {
		return nil, false
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out, true
}

func (d *unpacker) uint(size int) (uint64, bool) {
	p, ok := d.take(size)
	if !ok {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, true
}

func (d *unpacker) mapLen() (int, bool) {
	t, ok := d.take(1)
	if !ok {
		return 0, false
	}
	switch c := t[0]; {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), true
	case c == 0xde:
		v, ok := d.uint(2)
		return int(v), ok
	case c == 0xdf:
		v, ok := d.uint(4)
		return int(v), ok && v <= math.MaxInt32
	}
	return 0, false
}

// str reads a str or bin value.
func (d *unpacker) str() (string, bool) {
	t, ok := d.take(1)
	if !ok {
		return "", false
	}
	var n uint64
	switch c := t[0]; {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n, ok = d.uint(1)
	case c == 0xda || c == 0xc5:
		n, ok = d.uint(2)
	case c == 0xdb || c == 0xc6:
		n, ok = d.uint(4)
	default:
		return "", false
	}
	if !ok || n > uint64(len(d.b)) {
		return "", false
	}
	p, _ := d.take(int(n))
	return string(p), true
}

// value reads a str, bin, number, nil or boolean as a string.
func (d *unpacker) value() (string, bool) {
	if len(d.b) == 0 {
		return "", false
	}
	c := d.b[0]
	switch {
	case c&0xe0 == 0xa0, c == 0xd9, c == 0xda, c == 0xdb, c == 0xc4, c == 0xc5, c == 0xc6:
		return d.str()
	case c <= 0x7f:
		d.b = d.b[1:]
		return strconv.Itoa(int(c)), true
	case c >= 0xe0:
		d.b = d.b[1:]
		return strconv.Itoa(int(int8(c))), true
	case c == 0xc0:
		d.b = d.b[1:]
		return "", true
	case c == 0xc2, c == 0xc3:
		d.b = d.b[1:]
		if c == 0xc3 {
			return "1", true
		}
		return "", true
	case c >= 0xcc && c <= 0xcf: // uint 8..64
		d.b = d.b[1:]
		v, ok := d.uint(1 << (c - 0xcc))
		return strconv.FormatUint(v, 10), ok
	case c >= 0xd0 && c <= 0xd3: // int 8..64
		d.b = d.b[1:]
		size := 1 << (c - 0xd0)
		v, ok := d.uint(size)
		shift := 64 - 8*size
		return strconv.FormatInt(int64(v<<shift)>>shift, 10), ok
	case c == 0xca:
		d.b = d.b[1:]
		v, ok := d.uint(4)
		return formatFloat(float64(math.Float32frombits(uint32(v)))), ok
	case c == 0xcb:
		d.b = d.b[1:]
		v, ok := d.uint(8)
		return formatFloat(math.Float64frombits(v)), ok
	}
	return "", false
}

// formatFloat writes an integral float as an integer (a Lua number that
// cmsgpack stored as a double), any other as the shortest decimal.
func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	"github.com/delayq/delayq"
)

// Strict request decoding. encoding/json matches a key to a field without
// regard to case and lets a later duplicate key overwrite an earlier one,
// so {"BODY":"x"} was taken for a body and {"delay":"1s","delay":"1h"}
// for whichever came last: what the server did was not what a reader of
// the request would think it asked for. A request body is therefore
// checked, after encoding/json accepted it, against the fields of the
// type it decodes into: every key of every object must be a field's own
// name, exactly, and no object may hold a key twice. A body that is
// JSON null is refused too (it decoded to a request of all defaults).

// shape is what the strictWalker knows of the JSON a Go type takes: for a
// struct, its fields by exact JSON name; for a slice, its element's
// shape. A nil *shape is a value of any form (a map, a json.RawMessage,
// a type with its own UnmarshalJSON): its objects are checked for
// duplicate keys only.
type shape struct {
	fields map[string]*shape // a struct's fields, by JSON name
	folded map[string]string // lower-cased name → name, to name a key in the wrong case
	elem   *shape            // a slice's element
	object bool              // a struct: its keys are checked
}

var shapes sync.Map // reflect.Type → *shape

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf returns the shape of values of type t.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

func buildShape(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	if s, ok := seen[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		s := &shape{}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		if s.elem == nil {
			return nil
		}
		return s
	case reflect.Struct:
		s := &shape{object: true, fields: map[string]*shape{}, folded: map[string]string{}}
		seen[t] = s
		addFields(s, t, seen)
		return s
	}
	return nil
}

// addFields adds t's fields to s as encoding/json names them, the fields
// of embedded structs included.
func addFields(s *shape, t reflect.Type, seen map[reflect.Type]*shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.fields[name] = buildShape(f.Type, seen)
		s.folded[strings.ToLower(name)] = name
	}
}

// checkStrict checks data, a JSON value encoding/json has accepted, against
// the shape of v's type.
func checkStrict(data []byte, v any) error {
	c := strictWalker{data: data}
	c.path = c.pathArr[:0]
	c.ws()
	if bytes.HasPrefix(c.data[c.i:], []byte("null")) {
		return delayq.Invalid(delayq.CodeBadJSON, "", "the body is null; send a JSON object")
	}
	return c.value(shapeOf(reflect.TypeOf(v)))
}

// strictWalker walks valid JSON. It relies on the input being valid (it is
// run after encoding/json accepted it), but never reads out of bounds
// on any input.
type strictWalker struct {
	data []byte
	i    int
	// path is where the walk is, for messages: built into a string only
	// when there is something to say, so a good body allocates nothing
	// for it.
	path    []pathSeg
	pathArr [8]pathSeg
}

// pathSeg is one step of a path: a key, or an index when key is nil.
type pathSeg struct {
	key []byte
	idx int
}

// where is the path as a field name: "jobs[2].body".
func (c *strictWalker) where() string {
	var b strings.Builder
	for _, s := range c.path {
		switch {
		case s.key == nil:
			b.WriteString("[" + itoa(s.idx) + "]")
		case b.Len() > 0:
			b.WriteByte('.')
			fallthrough
		default:
			b.Write(s.key)
		}
	}
	return b.String()
}

func (c *strictWalker) ws() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\r', '\n':
			c.i++
		default:
			return
		}
	}
}

func (c *strictWalker) peek() byte {
	if c.i < len(c.data) {
		return c.data[c.i]
	}
	return 0
}

// value checks the value at c.i, of shape s.
func (c *strictWalker) value(s *shape) error {
	c.ws()
	switch c.peek() {
	case '{':
		return c.object(s)
	case '[':
		c.i++
		var elem *shape
		if s != nil {
			elem = s.elem
		}
		for n := 0; ; n++ {
			c.ws()
			switch c.peek() {
			case ']':
				c.i++
				return nil
			case 0:
				return nil
			}
			if elem != nil && elem.object && bytes.HasPrefix(c.data[c.i:], []byte("null")) {
				// It would decode to an element of all defaults (a job
				// with an empty body, in a batch).
				c.path = append(c.path, pathSeg{idx: n})
				return delayq.Invalid(delayq.CodeBadJSON, c.where(), "is null; send an object")
			}
			at := c.i
			c.path = append(c.path, pathSeg{idx: n})
			if err := c.value(elem); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
			if c.i == at {
				return nil // not reached on valid JSON; stop rather than spin
			}
			c.ws()
			if c.peek() == ',' {
				c.i++
			}
		}
	case '"':
		c.str()
		return nil
	}
	// A number or a literal: up to the next delimiter.
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return nil
		}
		c.i++
	}
	return nil
}

// object checks the object at c.i: no key twice, and, for a struct's
// shape, every key a field's exact name.
func (c *strictWalker) object(s *shape) error {
	c.i++                  // '{'
	var seenArr [16][]byte // few keys per object: a linear search beats a map
	seen := seenArr[:0]
	var many map[string]bool
	for {
		c.ws()
		switch c.peek() {
		case '}':
			c.i++
			return nil
		case ',':
			c.i++
			c.ws()
		case 0:
			return nil
		}
		if c.peek() != '"' {
			return nil // not reached on valid JSON
		}
		raw := c.str()
		key := raw
		if bytes.IndexByte(raw, '\\') >= 0 {
			var k string
			if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &k) == nil {
				key = []byte(k)
			}
		}
		if many == nil && len(seen) < len(seenArr) {
			for _, k := range seen {
				if bytes.Equal(k, key) {
					return c.dupField(key)
				}
			}
			seen = append(seen, key)
		} else {
			if many == nil {
				many = make(map[string]bool, 32)
				for _, k := range seen {
					many[string(k)] = true
				}
			}
			if many[string(key)] {
				return c.dupField(key)
			}
			many[string(key)] = true
		}
		var child *shape
		if s != nil && s.object {
			f, ok := s.fields[string(key)]
			if !ok {
				return c.unknownField(s, key)
			}
			child = f
		}
		c.ws()
		if c.peek() == ':' {
			c.i++
		}
		at := c.i
		c.path = append(c.path, pathSeg{key: key})
		if err := c.value(child); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		if c.i == at {
			return nil // not reached on valid JSON; stop rather than spin
		}
	}
}

// str skips the string at c.i and returns its raw contents.
func (c *strictWalker) str() []byte {
	c.i++ // '"'
	start := c.i
	for {
		j := bytes.IndexByte(c.data[c.i:], '"')
		if j < 0 {
			c.i = len(c.data)
			return c.data[start:]
		}
		c.i += j
		// An escaped quote has an odd run of backslashes before it.
		n := 0
		for k := c.i - 1; k >= start && c.data[k] == '\\'; k-- {
			n++
		}
		c.i++
		if n%2 == 0 {
			return c.data[start : c.i-1]
		}
	}
}

func (c *strictWalker) dupField(key []byte) error {
	c.path = append(c.path, pathSeg{key: key})
	return delayq.Invalid(delayq.CodeDuplicateField, c.where(), "given twice; give each field once")
}

func (c *strictWalker) unknownField(s *shape, key []byte) error {
	parent := c.where()
	c.path = append(c.path, pathSeg{key: key})
	if name, ok := s.folded[strings.ToLower(string(key))]; ok {
		return delayq.Invalid(delayq.CodeUnknownField, c.where(), "unknown field; field names are case-sensitive: did you mean %q?", name)
	}
	return delayq.Invalid(delayq.CodeUnknownField, parent, "unknown field %q", string(key))
}

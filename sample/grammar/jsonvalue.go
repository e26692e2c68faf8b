package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// jv is a JSON value that keeps its objects' key order (llama.cpp's
// ordered_json: a schema's properties are generated in the order written).
type jv struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*jv // object values by keys, or array items
	str  string
	num  json.Number
	b    bool
}

func parseJSON(data []byte) (*jv, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the schema")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (*jv, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '{' {
			return decodeObject(d)
		}
		if t == '[' {
			v := &jv{kind: 'a'}
			for d.More() {
				x, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, x)
			}
			_, err := d.Token()
			return v, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &jv{kind: 's', str: t}, nil
	case json.Number:
		return &jv{kind: 'n', num: t}, nil
	case bool:
		return &jv{kind: 'b', b: t}, nil
	}
	return &jv{kind: 'z'}, nil
}

func decodeObject(d *json.Decoder) (*jv, error) {
	v := &jv{kind: 'o'}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil, err
		}
		x, err := decodeValue(d)
		if err != nil {
			return nil, err
		}
		key := k.(string)
		if i := v.index(key); i >= 0 { // a repeated key: the last one wins
			v.vals[i] = x
			continue
		}
		v.keys = append(v.keys, key)
		v.vals = append(v.vals, x)
	}
	_, err := d.Token()
	return v, err
}

func (v *jv) index(key string) int {
	if v == nil || v.kind != 'o' {
		return -1
	}
	for i, k := range v.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// get returns the member key of an object, or nil.
func (v *jv) get(key string) *jv {
	if i := v.index(key); i >= 0 {
		return v.vals[i]
	}
	return nil
}

func (v *jv) has(key string) bool { return v.index(key) >= 0 }

func (v *jv) isString(s string) bool { return v != nil && v.kind == 's' && v.str == s }

// dump is the compact JSON text of v (nlohmann's dump(): no spaces, UTF-8
// kept; numbers as written).
func (v *jv) dump() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *jv) write(b *strings.Builder) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			v.vals[i].write(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, x := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			x.write(b)
		}
		b.WriteByte(']')
	case 's':
		writeString(b, v.str)
	case 'n':
		b.WriteString(v.num.String())
	case 'b':
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	default:
		b.WriteString("null")
	}
}

func writeString(b *strings.Builder, s string) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

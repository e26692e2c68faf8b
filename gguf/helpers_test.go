package gguf

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// raw builds GGUF bytes field by field, so tests can write files the Writer
// refuses to produce.
type raw struct{ bytes.Buffer }

func (r *raw) u8(v uint8)   { r.WriteByte(v) }
func (r *raw) u32(v uint32) { r.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (r *raw) u64(v uint64) { r.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func (r *raw) str(s string) { r.u64(uint64(len(s))); r.WriteString(s) }

type rawKV struct {
	key     string
	typ     uint32
	payload []byte
}

type rawTensor struct {
	name string
	dims []uint64
	typ  uint32
	off  uint64
}

func kvU32(key string, v uint32) rawKV {
	return rawKV{key, uint32(TypeUint32), binary.LittleEndian.AppendUint32(nil, v)}
}

func kvStr(key, v string) rawKV {
	var r raw
	r.str(v)
	return rawKV{key, uint32(TypeString), r.Bytes()}
}

// rawFile lays out a file like the Writer does but with every field chosen by
// the caller; data is dataLen bytes after padding to align.
func rawFile(version uint32, kvs []rawKV, tensors []rawTensor, align, dataLen int) []byte {
	var r raw
	r.WriteString(Magic)
	r.u32(version)
	r.u64(uint64(len(tensors)))
	r.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		r.str(kv.key)
		r.u32(kv.typ)
		r.Write(kv.payload)
	}
	for _, t := range tensors {
		r.str(t.name)
		r.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			r.u64(d)
		}
		r.u32(t.typ)
		r.u64(t.off)
	}
	for r.Len()%align != 0 {
		r.u8(0)
	}
	r.Write(make([]byte, dataLen))
	return r.Bytes()
}

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// randomTensor returns random bytes of the size of a tensor of type tt and dims.
func randomTensor(rng *rand.Rand, tt quant.Type, dims []uint64) []byte {
	st, err := strides(tt, dims)
	if err != nil {
		panic(err)
	}
	ne := [4]uint64{1, 1, 1, 1}
	copy(ne[:], dims)
	b := make([]byte, st[3]*ne[3])
	rng.Read(b)
	return b
}

// allTypes lists every ggml type package quant knows, in numeric order.
func allTypes() []quant.Type {
	var ts []quant.Type
	for i := 0; i < 64; i++ {
		if t := quant.Type(i); t.Known() {
			ts = append(ts, t)
		}
	}
	return ts
}

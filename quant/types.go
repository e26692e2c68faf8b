package quant

import (
	"errors"
	"fmt"
	"math"
)

// Type is a ggml tensor element type, numbered exactly as ggml's enum ggml_type
// (the numbers are what GGUF files store).
type Type uint32

// The ggml types. Numbers are fixed by the GGUF format; gaps are types ggml removed.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// ErrUnknownType reports a type number ggml does not define.
var ErrUnknownType = errors.New("unknown ggml type")

// Traits describe the storage of one type: elements are stored in blocks of
// BlockSize elements taking TypeSize bytes.
type Traits struct {
	Name      string
	BlockSize int
	TypeSize  int
}

var traits = map[Type]Traits{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", 256, 84},
	Q3_K:    {"Q3_K", 256, 110},
	Q4_K:    {"Q4_K", 256, 144},
	Q5_K:    {"Q5_K", 256, 176},
	Q6_K:    {"Q6_K", 256, 210},
	Q8_K:    {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66},
	IQ2_XS:  {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S:   {"IQ1_S", 256, 50},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ3_S:   {"IQ3_S", 256, 110},
	IQ2_S:   {"IQ2_S", 256, 82},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", 256, 56},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 54},
	TQ2_0:   {"TQ2_0", 256, 66},
	MXFP4:   {"MXFP4", 32, 17},
}

// Known reports whether t is a type ggml defines.
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// Traits returns t's storage traits; ok is false for an unknown type.
func (t Type) Traits() (Traits, bool) { tr, ok := traits[t]; return tr, ok }

// String returns ggml's name of the type ("Q4_K"), or "type(N)" when unknown.
func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements per block (0 for an unknown type).
func (t Type) BlockSize() int { return traits[t].BlockSize }

// TypeSize is the number of bytes per block (0 for an unknown type).
func (t Type) TypeSize() int { return traits[t].TypeSize }

// RowSize returns the bytes of a row of n elements. It fails with an error
// wrapping ErrUnknownType when t is unknown, and one wrapping ErrLength when n
// is negative, not a whole number of blocks, or so large the size overflows.
func (t Type) RowSize(n int64) (int64, error) {
	tr, ok := traits[t]
	if !ok {
		return 0, fmt.Errorf("%w %d", ErrUnknownType, uint32(t))
	}
	if n < 0 || n%int64(tr.BlockSize) != 0 {
		return 0, fmt.Errorf("quant: row of %d elements is not a multiple of %s's block size %d: %w", n, tr.Name, tr.BlockSize, ErrLength)
	}
	nb := n / int64(tr.BlockSize)
	if nb > math.MaxInt64/int64(tr.TypeSize) {
		return 0, fmt.Errorf("quant: row of %d %s elements overflows int64 bytes: %w", n, tr.Name, ErrLength)
	}
	return nb * int64(tr.TypeSize), nil
}

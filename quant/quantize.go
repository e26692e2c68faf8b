package quant

import "fmt"

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t Type) bool {
	_, ok := quantizers[t]
	return ok
}

var quantizers = map[Type]func(x []float32, y []byte){}

// Quantize converts src (a whole number of blocks) to type t into dst, which
// must be exactly t.RowSize(len(src)) bytes. It reproduces llama.cpp's
// reference quantizer (quantize_row_*_ref, what llama-quantize uses without an
// importance matrix) byte for byte. Blocks are independent, so src may hold
// any number of rows.
func Quantize(t Type, src []float32, dst []byte) error {
	q, ok := quantizers[t]
	if !ok {
		if !t.Known() {
			return fmt.Errorf("quant: quantize: %w %d", ErrUnknownType, uint32(t))
		}
		return fmt.Errorf("quant: quantize to %s: %w", t, ErrUnsupported)
	}
	if _, err := checkLengths("quantize", t, len(dst), len(src)); err != nil {
		return err
	}
	q(src, dst)
	return nil
}

package kernels

import "github.com/pipe-engine/pipe/quant"

// Local computes products on the calling goroutine alone: no helper
// threads, no lock. It is how a body run by Pool.ParallelWith multiplies
// (one Local per thread index, so several experts are computed whole at
// once, one per thread). Its results are bit-identical to the Pool's for
// the same product: the same kernels compute every row. The zero value is
// ready to use; a Local is used by one goroutine at a time and keeps its
// quantized activations and multi-token buffers from call to call.
type Local struct {
	job   job
	batch []*Activation
}

// MatMul is Pool.MatMul on the calling goroutine.
func (l *Local) MatMul(t quant.Type, w []byte, rows, cols int, x []float32, n int, y []float32) error {
	rb, err := checkMatMul(t, w, rows, cols, x, n, y)
	if err != nil || n == 0 {
		return err
	}
	acts, err := quantizeBatch(&l.batch, t, x, n, cols)
	if err != nil {
		return err
	}
	j := &l.job
	if j.spans == nil {
		j.spans = make([]span, 1)
	}
	j.prepare(t, w, rb, rows, acts, y)
	defer j.release()
	j.chunk = max(rows, 1)
	j.deal((rows+j.chunk-1)/j.chunk, 1)
	j.run(0)
	return nil
}

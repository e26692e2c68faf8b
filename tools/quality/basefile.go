package quality

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The --kl-divergence-base file, in llama-perplexity's format (so either
// program reads the other's), little-endian:
//
//	"_logits_"                 8 bytes
//	n_ctx                      uint32
//	n_vocab, n_chunk           int32, int32
//	tokens                     n_chunk·n_ctx int32 (the evaluated text, before any BOS substitution)
//	per chunk, per scored position (n_ctx − 1 − n_ctx/2 of them):
//	  scale, min               float32, float32 (the first four uint16 of the row)
//	  q                        n_vocab uint16, padded with zeros to an even count
//
// A position's log-probability of token i is scale·q[i] + min (see LogProbs).

const baseMagic = "_logits_"

// ErrBaseFile: a --kl-divergence-base file is not one, or does not fit the
// model or the run.
var ErrBaseFile = errors.New("bad KL-divergence base file")

// rowUint16s is llama-perplexity's nv: the uint16 slots of one saved row.
func rowUint16s(nVocab int) int { return 2*((nVocab+1)/2) + 4 }

// baseWriter writes a base file.
type baseWriter struct {
	w   *bufio.Writer
	buf []byte
}

func newBaseWriter(w io.Writer, nCtx, nVocab, nChunk int, tokens []int32) (*baseWriter, error) {
	bw := &baseWriter{w: bufio.NewWriterSize(w, 1<<20), buf: make([]byte, 2*rowUint16s(nVocab))}
	hdr := append([]byte(baseMagic), make([]byte, 12)...)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(nCtx))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(int32(nVocab)))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(int32(nChunk)))
	if _, err := bw.w.Write(hdr); err != nil {
		return nil, err
	}
	tb := make([]byte, 4*nChunk*nCtx)
	for i, t := range tokens[:nChunk*nCtx] {
		binary.LittleEndian.PutUint32(tb[4*i:], uint32(t))
	}
	if _, err := bw.w.Write(tb); err != nil {
		return nil, err
	}
	return bw, nil
}

// row appends one position's log-probabilities.
func (bw *baseWriter) row(lp *LogProbs) error {
	b := bw.buf
	binary.LittleEndian.PutUint32(b[0:], math.Float32bits(lp.Scale))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(lp.Min))
	for i, q := range lp.Q {
		binary.LittleEndian.PutUint16(b[8+2*i:], q)
	}
	_, err := bw.w.Write(b)
	return err
}

func (bw *baseWriter) flush() error { return bw.w.Flush() }

// Base is an open base file: its header, then its rows read in order.
type Base struct {
	NCtx, NVocab, NChunk int
	Tokens               []int32 // NChunk·NCtx
	r                    *bufio.Reader
	buf                  []byte
	name                 string
	rows                 int // rows read
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// maxBaseTokens bounds the header's n_chunk·n_ctx (a corrupt header must not
// make us allocate terabytes): 2^28 tokens is a 1 GiB token table.
const maxBaseTokens = 1 << 28

// OpenBase reads the header of the base file r (name is for errors).
func OpenBase(r io.Reader, name string) (*Base, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(br, hdr); err != nil || string(hdr[:8]) != baseMagic {
		return nil, fmt.Errorf("%w: %s does not look like a file of log-probabilities (no %q header)", ErrBaseFile, name, baseMagic)
	}
	b := &Base{
		NCtx:   int(binary.LittleEndian.Uint32(hdr[8:])),
		NVocab: int(int32(binary.LittleEndian.Uint32(hdr[12:]))),
		NChunk: int(int32(binary.LittleEndian.Uint32(hdr[16:]))),
		r:      br, name: name,
	}
	switch {
	case b.NCtx < 4 || b.NCtx > 1<<24:
		return nil, fmt.Errorf("%w: %s: n_ctx %d", ErrBaseFile, name, b.NCtx)
	case b.NVocab < 1 || b.NVocab > 1<<24:
		return nil, fmt.Errorf("%w: %s: n_vocab %d", ErrBaseFile, name, b.NVocab)
	case b.NChunk < 1 || int64(b.NChunk)*int64(b.NCtx) > maxBaseTokens:
		return nil, fmt.Errorf("%w: %s: n_chunk %d", ErrBaseFile, name, b.NChunk)
	}
	tb := make([]byte, 4*b.NChunk*b.NCtx)
	if _, err := io.ReadFull(br, tb); err != nil {
		return nil, fmt.Errorf("%w: %s: the evaluation tokens: %w", ErrBaseFile, name, err)
	}
	b.Tokens = make([]int32, b.NChunk*b.NCtx)
	for i := range b.Tokens {
		b.Tokens[i] = int32(binary.LittleEndian.Uint32(tb[4*i:]))
	}
	b.buf = make([]byte, 2*rowUint16s(b.NVocab))
	return b, nil
}

// row reads the next position's log-probabilities into lp (chunk is for
// errors).
func (b *Base) row(lp *LogProbs, chunk int) error {
	if _, err := io.ReadFull(b.r, b.buf); err != nil {
		return fmt.Errorf("%w: %s: the log-probabilities of chunk %d: %w", ErrBaseFile, b.name, chunk+1, err)
	}
	b.rows++
	lp.Scale = math.Float32frombits(binary.LittleEndian.Uint32(b.buf[0:]))
	lp.Min = math.Float32frombits(binary.LittleEndian.Uint32(b.buf[4:]))
	if !finite(lp.Scale) || !finite(lp.Min) {
		// NaN log-probabilities compare as nothing, and the KL divergence
		// came out 0, a perfect match (issue 35).
		return fmt.Errorf("%w: %s: row %d (chunk %d): log-probability scale %v, min %v are not finite numbers",
			ErrBaseFile, b.name, b.rows, chunk+1, lp.Scale, lp.Min)
	}
	for i := range lp.Q {
		lp.Q[i] = binary.LittleEndian.Uint16(b.buf[8+2*i:])
	}
	return nil
}

package model

// kvfile.go: a State's filled positions as bytes (slot save and restore).
// The format is pipe's own, not llama.cpp's: the magic "PIPEKV1\n", then
// little-endian uint32s — the KV type, the layer count and the positions
// filled — and per layer its row width, K-only flag and recurrent-state
// length; then per layer the K rows (and V rows unless K-only) of the filled
// positions in the State's element type, or the recurrent state's floats.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrStateFile: saved state bytes that are not a State of this shape.
var ErrStateFile = errors.New("not a saved state of this model and context")

var stateMagic = [8]byte{'P', 'I', 'P', 'E', 'K', 'V', '1', '\n'}

// Save writes the state's filled positions to w and returns the bytes
// written.
func (s *State) Save(w io.Writer) (int64, error) {
	cw := &countWriter{w: bufio.NewWriter(w)}
	hdr := []uint32{uint32(s.Type), uint32(len(s.widths)), uint32(s.Pos)}
	for l, wd := range s.widths {
		hdr = append(hdr, uint32(wd), b2u(s.kOnly[l]), uint32(len(s.rec[l])))
	}
	err := errors.Join(binary.Write(cw, binary.LittleEndian, stateMagic), binary.Write(cw, binary.LittleEndian, hdr))
	for l := range s.widths {
		for _, part := range s.parts(l, s.Pos) {
			err = errors.Join(err, binary.Write(cw, binary.LittleEndian, part))
		}
	}
	if err == nil {
		err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, err
}

// Load replaces the state's contents with saved bytes from r (Save's) and
// returns the bytes read; a file of another shape, or more positions than
// the state holds, is ErrStateFile and leaves the state empty.
func (s *State) Load(r io.Reader) (int64, error) {
	cr := &countReader{r: bufio.NewReader(r)}
	pos, err := s.loadHeader(cr)
	if err == nil {
		s.grow(pos)
		for l := range s.widths {
			for _, part := range s.parts(l, pos) {
				if err = binary.Read(cr, binary.LittleEndian, part); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		s.Pos = 0
		for _, rc := range s.rec {
			clear(rc)
		}
		s.Trim()
		return cr.n, fmt.Errorf("%w: %w", ErrStateFile, err)
	}
	s.Pos = pos
	return cr.n, nil
}

// loadHeader reads and checks the magic and the shape, and returns the
// positions saved.
func (s *State) loadHeader(r io.Reader) (int, error) {
	var magic [8]byte
	var head [3]uint32
	if err := errors.Join(binary.Read(r, binary.LittleEndian, &magic), binary.Read(r, binary.LittleEndian, &head)); err != nil {
		return 0, err
	}
	if magic != stateMagic || head[0] != uint32(s.Type) || head[1] != uint32(len(s.widths)) || int(head[2]) > s.NCtx {
		return 0, fmt.Errorf("header %q type %d, %d layers, %d positions; want type %d, %d layers, at most %d", magic[:], head[0], head[1], head[2], s.Type, len(s.widths), s.NCtx)
	}
	layers := make([]uint32, 3*len(s.widths))
	if err := binary.Read(r, binary.LittleEndian, layers); err != nil {
		return 0, err
	}
	for l, wd := range s.widths {
		if got := layers[3*l : 3*l+3]; got[0] != uint32(wd) || got[1] != b2u(s.kOnly[l]) || got[2] != uint32(len(s.rec[l])) {
			return 0, fmt.Errorf("layer %d: width %d, K-only %d, recurrent %d; want %d, %d, %d", l, got[0], got[1], got[2], wd, b2u(s.kOnly[l]), len(s.rec[l]))
		}
	}
	return int(head[2]), nil
}

// parts are layer l's slices of the first pos positions: the recurrent
// state, or the K rows and (unless K-only) the V rows.
func (s *State) parts(l, pos int) []any {
	if s.rec[l] != nil {
		return []any{s.rec[l]}
	}
	n := pos * s.widths[l]
	if s.Type == KVF32 {
		if s.kOnly[l] {
			return []any{s.k32[l][:n]}
		}
		return []any{s.k32[l][:n], s.v32[l][:n]}
	}
	if s.kOnly[l] {
		return []any{s.k16[l][:n]}
	}
	return []any{s.k16[l][:n], s.v16[l][:n]}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

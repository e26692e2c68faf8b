package tokenizer

// Stream turns generated token ids into text incrementally, and only ever
// returns valid, complete UTF-8:
//
//   - when a token ends inside a multi-byte character (byte-level BPE often
//     splits them), the partial bytes are held back until the following tokens
//     complete them;
//   - bytes that can never become valid UTF-8 are replaced by U+FFFD, one per
//     maximal ill-formed subpart (the Unicode "substitution of maximal
//     subparts" practice that Python's errors="replace" and WHATWG follow), so
//     the concatenated output equals bytes.decode("utf-8", "replace") of all
//     pieces.
//
// A Stream is not safe for concurrent use.
type Stream struct {
	t       *Tokenizer
	special bool
	pend    []byte
	out     []byte
}

// NewStream starts a detokenization stream. special has the meaning it has for
// Piece (print CONTROL tokens' text or not).
func (t *Tokenizer) NewStream(special bool) *Stream {
	return &Stream{t: t, special: special}
}

// Add appends token id and returns the newly completed text (possibly "").
func (s *Stream) Add(id int32) string {
	s.pend = s.t.Piece(s.pend, id, s.special)
	return s.drain(false)
}

// Pending reports how many bytes are held back.
func (s *Stream) Pending() int { return len(s.pend) }

// Flush returns what is held back at the end of generation (an incomplete
// character becomes U+FFFD) and resets the stream.
func (s *Stream) Flush() string { return s.drain(true) }

const replacement = "\uFFFD"

// seqInfo returns, for lead byte b, the length of the well-formed sequence it
// starts and the allowed range of the second byte (0 length: b cannot start
// a sequence).
func seqInfo(b byte) (n int, lo, hi byte) {
	switch {
	case b < 0x80:
		return 1, 0, 0
	case b >= 0xC2 && b <= 0xDF:
		return 2, 0x80, 0xBF
	case b == 0xE0:
		return 3, 0xA0, 0xBF
	case b == 0xED:
		return 3, 0x80, 0x9F
	case b >= 0xE1 && b <= 0xEF:
		return 3, 0x80, 0xBF
	case b == 0xF0:
		return 4, 0x90, 0xBF
	case b >= 0xF1 && b <= 0xF3:
		return 4, 0x80, 0xBF
	case b == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// drain moves every decidable byte of pend to the output. Without final, a
// valid but incomplete sequence at the end stays in pend.
func (s *Stream) drain(final bool) string {
	p := s.pend
	s.out = s.out[:0]
	i := 0
	for i < len(p) {
		n, lo, hi := seqInfo(p[i])
		if n == 1 {
			s.out = append(s.out, p[i])
			i++
			continue
		}
		if n == 0 {
			s.out = append(s.out, replacement...)
			i++
			continue
		}
		// k = number of bytes of the well-formed prefix present.
		k := 1
		for k < n && i+k < len(p) {
			c := p[i+k]
			if k == 1 {
				if c < lo || c > hi {
					break
				}
			} else if c < 0x80 || c > 0xBF {
				break
			}
			k++
		}
		switch {
		case k == n:
			s.out = append(s.out, p[i:i+n]...)
			i += n
			continue
		case i+k == len(p) && !final:
			// valid so far, waiting for more bytes
		default:
			s.out = append(s.out, replacement...)
			i += k
			continue
		}
		break
	}
	rest := copy(s.pend, p[i:])
	s.pend = s.pend[:rest]
	return string(s.out)
}

package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// byteToUnicode is GPT-2's bytes_to_unicode table: printable Latin-1 bytes
// ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves, every other byte b to the
// code point 256+n, n counting those bytes in order. Entries are UTF-8 strings.
var byteToUnicode [256]string

// unicodeToByte is the inverse of byteToUnicode, indexed by code point
// (all of them are below 0x144); -1 marks code points outside the table.
var unicodeToByte [0x144]int16

func init() {
	for i := range unicodeToByte {
		unicodeToByte[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		var r rune
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			r = rune(b)
		} else {
			r = rune(256 + n)
			n++
		}
		byteToUnicode[b] = string(r)
		unicodeToByte[r] = int16(b)
	}
}

// decodeByteLevel maps the byte-level text of a NORMAL token back to raw
// bytes, as llama.cpp's llama_decode_text (including its "[UNK_BYTE_0x..]"
// marker for code points outside the table).
func decodeByteLevel(dst []byte, text string) []byte {
	for i := 0; i < len(text); {
		r, n := decodeOne(text[i:])
		i += n
		if int(r) < len(unicodeToByte) && unicodeToByte[r] >= 0 {
			dst = append(dst, byte(unicodeToByte[r]))
			continue
		}
		dst = append(dst, "[UNK_BYTE_0x"...)
		for _, x := range appendCodepointUTF8(nil, r) {
			dst = fmt.Appendf(dst, "%02x", x)
		}
		dst = append(dst, text...)
		dst = append(dst, ']')
	}
	return dst
}

// decodeOne decodes the first code point of s (len(s) > 0) exactly as
// llama.cpp's unicode_cpt_from_utf8 inside unicode_cpts_from_utf8: the lead
// byte decides the length, continuation bytes are checked for the 10xxxxxx
// pattern only (overlong forms and surrogates are accepted), and a byte that
// does not start a well-formed sequence becomes U+FFFD and consumes one byte.
// Code points above U+10FFFF (which llama.cpp cannot re-encode) also become
// U+FFFD.
func decodeOne(s string) (rune, int) {
	c := s[0]
	if c < 0x80 {
		return rune(c), 1
	}
	var n int
	var r rune
	switch {
	case c&0x40 == 0:
		return utf8.RuneError, 1
	case c&0x20 == 0:
		n, r = 2, rune(c&0x1f)
	case c&0x10 == 0:
		n, r = 3, rune(c&0x0f)
	case c&0x08 == 0:
		n, r = 4, rune(c&0x07)
	default:
		return utf8.RuneError, 1
	}
	if len(s) < n {
		return utf8.RuneError, 1
	}
	for k := 1; k < n; k++ {
		if s[k]&0xc0 != 0x80 {
			return utf8.RuneError, 1
		}
		r = r<<6 | rune(s[k]&0x3f)
	}
	if r > 0x10FFFF {
		r = utf8.RuneError
	}
	return r, n
}

// decodeCodepoints appends the code points of s to dst (see decodeOne).
func decodeCodepoints(s string, dst []rune) []rune {
	for i := 0; i < len(s); {
		if c := s[i]; c < 0x80 {
			dst = append(dst, rune(c))
			i++
			continue
		}
		r, n := decodeOne(s[i:])
		dst = append(dst, r)
		i += n
	}
	return dst
}

// appendCodepointUTF8 encodes r like llama.cpp's unicode_cpt_to_utf8, which
// (unlike Go) also encodes surrogate code points as three bytes.
func appendCodepointUTF8(dst []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(dst, byte(r))
	case r < 0x800:
		return append(dst, 0xc0|byte(r>>6), 0x80|byte(r&0x3f))
	case r < 0x10000:
		return append(dst, 0xe0|byte(r>>12), 0x80|byte((r>>6)&0x3f), 0x80|byte(r&0x3f))
	default:
		return append(dst, 0xf0|byte(r>>18), 0x80|byte((r>>12)&0x3f), 0x80|byte((r>>6)&0x3f), 0x80|byte(r&0x3f))
	}
}

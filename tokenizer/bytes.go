package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// byteToUnicode is GPT-2's bytes_to_unicode table: printable Latin-1 bytes
// ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves, every other byte b to the
// code point 256+n, n counting those bytes in order. Entries are UTF-8 strings.
var byteToUnicode [256]string

// unicodeToByte is the inverse of byteToUnicode, keyed by code point.
var unicodeToByte map[rune]byte

func init() {
	unicodeToByte = make(map[rune]byte, 256)
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
		unicodeToByte[r] = byte(b)
	}
}

// decodeByteLevel maps the byte-level text of a NORMAL token back to raw
// bytes, as llama.cpp's llama_decode_text (including its "[UNK_BYTE_0x..]"
// marker for code points outside the table).
func decodeByteLevel(text string) []byte {
	out := make([]byte, 0, len(text))
	cpts := decodeCodepoints(text, nil)
	for _, c := range cpts {
		if b, ok := unicodeToByte[c]; ok {
			out = append(out, b)
			continue
		}
		out = append(out, "[UNK_BYTE_0x"...)
		for _, x := range []byte(string(c)) {
			out = fmt.Appendf(out, "%02x", x)
		}
		out = append(out, text...)
		out = append(out, ']')
	}
	return out
}

// decodeCodepoints decodes UTF-8 exactly as llama.cpp's unicode_cpts_from_utf8:
// the lead byte decides the length, continuation bytes are checked for the
// 10xxxxxx pattern only (overlong forms and surrogates are accepted), and every
// byte that does not start a well-formed sequence becomes U+FFFD. Code points
// above U+10FFFF (which llama.cpp cannot re-encode) also become U+FFFD.
func decodeCodepoints(s string, dst []rune) []rune {
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			dst = append(dst, rune(c))
			i++
			continue
		}
		var n int
		var r rune
		switch {
		case c&0x40 == 0:
			n = 0
		case c&0x20 == 0:
			n, r = 2, rune(c&0x1f)
		case c&0x10 == 0:
			n, r = 3, rune(c&0x0f)
		case c&0x08 == 0:
			n, r = 4, rune(c&0x07)
		}
		ok := n > 0 && i+n <= len(s)
		for k := 1; ok && k < n; k++ {
			if s[i+k]&0xc0 != 0x80 {
				ok = false
			} else {
				r = r<<6 | rune(s[i+k]&0x3f)
			}
		}
		if !ok {
			dst = append(dst, utf8.RuneError)
			i++
			continue
		}
		if r > 0x10FFFF {
			r = utf8.RuneError
		}
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

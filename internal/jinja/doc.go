// Package jinja is pipe's fork of github.com/ardanlabs/jinja v1.8.0
// (Apache-2.0, see LICENSE), a pure-Go Jinja engine written for the chat
// templates GGUF files carry. A chat template is a program from the model
// file, so the fork runs it as untrusted code: RenderContext stops at the
// caller's context and at Limits (output bytes, bytes allocated, steps —
// loop iterations and calls —, macro call depth, a deadline), and fixed caps
// bound any one value (MaxValueBytes, MaxItems) and the nesting of blocks,
// expressions and values (MaxNesting). The operations whose result can
// dwarf their input (string repetition, range, replace, join, indent,
// tojson's indent, format, splitting a string) check the size before
// building it, and the ones that can run long in one call (repetition,
// replace, format, join, tojson, sort, dictsort, unique and the loops of
// map, select and their kin) poll the context and the deadline as they go; parsing is linear in the template and bounded in depth. A
// limit hit is a *LimitError (errors.Is ErrLimit); a panic inside the
// engine is recovered into ErrEngine.
//
// testdata/golden.json records what upstream renders for every real template
// in testdata (upstream's own, the tiny GGUFs' and the repository's
// testdata/chat-templates) with every context there; TestGoldenRealTemplates
// proves the fork renders them identically. TestLlamaCppTemplates does the
// same, byte for byte, for the 68 templates of llama.cpp's models/templates
// (testdata/chat-templates/llamacpp) with the conversations of
// testdata/llamacpp/contexts.json, against goldens recorded with upstream by
// the separate module testdata/upstream.
package jinja

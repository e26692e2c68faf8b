// Package tokenizer turns prompt text into token ids and generated token ids
// back into text, exactly as llama.cpp (commit d775b89) does for byte-level
// BPE vocabularies ("gpt2" tokenizer model in GGUF), and as llama.cpp
// 3f545becc does for Gemma 4's SPM-style BPE ("gemma4" tokenizer model).
//
// Role in the pipeline: cmd/pipe and model build a Tokenizer once from the GGUF
// metadata (tokenizer.ggml.*), encode the prompt (optionally after rendering a
// chat template with Chat), and stream the generated ids back to stdout through
// a Stream, which only ever emits complete UTF-8. IsEOG tells the decode loop
// when to stop.
//
// What is implemented, and how it follows llama.cpp:
//
//   - Special tokens: tokens whose type is CONTROL or USER_DEFINED (after
//     llama.cpp's load-time fix-ups: EOG/EOT/FIM names forced to CONTROL, the
//     gpt-oss <|channel|> <|message|> <|start|> <|constrain|> forced to
//     USER_DEFINED, <|end|> dropped from EOG when <|return|> and <|call|> exist)
//     are matched as whole strings before BPE, longest first, like
//     tokenizer_st_partition. USER_DEFINED tokens are always matched; CONTROL
//     tokens only with parseSpecial.
//   - Pre-tokenizers, chosen by tokenizer.ggml.pre: "qwen2" (also
//     "deepseek-r1-qwen") and "gpt-4o" (also "llama4"). llama.cpp runs
//     these through std::regex on a "collapsed" text in which every non-ASCII
//     code point is replaced by a class byte (letter, number, whitespace, ...),
//     so \p{L} only distinguishes ASCII case: a non-ASCII letter counts as both
//     upper and lower case, and combining marks are not letters. The splitters
//     here are hand-written leftmost-first matchers with those semantics (Go's
//     regexp has no lookahead), using Go's unicode tables for the categories
//     (Unicode 15.0; llama.cpp's generated tables carry 15.0 assignments too,
//     so only code points assigned later could classify differently). A test
//     checks them against a backtracking ECMAScript-semantics reference.
//   - BPE merges by rank with llama.cpp's tie rule (lowest rank, then leftmost),
//     GPT-2 bytes_to_unicode byte encoding, and llama.cpp's byte fallback.
//   - Invalid UTF-8 in the input is decoded the way llama.cpp's
//     unicode_cpts_from_utf8 does it (each bad byte becomes U+FFFD).
//   - No normalization (llama.cpp applies none for these pre-types, unlike the
//     HF tokenizer's NFC for Qwen).
//   - Gemma 4 ("gemma4" model, or pre "gemma4"): spaces become U+2581, words
//     are runs of newlines and runs of anything else, a newline run that is a
//     token is taken whole, BPE merges run on raw UTF-8 characters, symbols
//     without a token fall back to <0xXX> byte tokens, BOS is always added
//     (llama.cpp overrides add_bos_token), and pieces turn U+2581 back into
//     spaces. Checked against llama.cpp's ids on a synthetic vocabulary
//     (testdata/gemma4-vocab): there is no real Gemma 4 vocabulary here, so
//     the real one's merges, byte tokens and special-token types are not.
//
// By default chat templates are not interpreted: Chat renders built-in known formats,
// detected from the tokenizer.chat_template text the way llama.cpp's
// llm_chat_detect_template does: ChatML (template contains "<|im_start|>") and
// the gpt-oss harmony format (template contains "<|start|>" and
// "<|channel|>"), Gemma 4 (template contains "<|turn>" and "<turn|>";
// llama.cpp itself renders that one with the model's Jinja template, whose
// plain-text output renderGemma4 reproduces), rendered as
// llama.cpp's built-in renderers do (the harmony one is llama.cpp's simplified
// form, without the model's default system preamble). Qwen3's --no-think is
// the empty think block its template emits for enable_thinking=false. Any other
// template is detected as one of llama.cpp's built-in templates when it
// can be (DetectLlamaTemplate, as llama.cpp without --jinja), else gives
// ErrUnsupportedTemplate. ChatDelta renders only a new turn for
// interactive use. UseBuiltin chooses a format by name: pipe's, or one of
// llama.cpp's 54 built-in templates (llamachat.go: LlamaTemplateNames,
// RenderLlamaTemplate, DetectLlamaTemplate, ported from its llama-chat.cpp).
// UseJinja runs a template as Jinja instead (internal/jinja,
// a bounded fork of github.com/ardanlabs/jinja): the template is untrusted
// code from the model file, so every render runs under the engine's limits
// and the caller's context (ChatContext), and its errors name the
// template's origin and the limit hit (ErrTemplateLimit).
//
// A BOS or EOS id outside the vocabulary is refused (ErrInvalid naming the
// key); other out-of-range special ids are ignored, as llama.cpp does.
//
// Decoding: Piece is llama.cpp's token_to_piece; Decode concatenates pieces
// (clean_spaces is off for these pre-types, so no space clean-up); Stream
// emits only complete, valid UTF-8 and replaces impossible bytes with U+FFFD.
//
// Known gap: when several EOT-like names exist and the GGUF has no
// tokenizer.ggml.eot_token_id, llama.cpp picks the EOT by unordered_map order;
// here a fixed priority is used. It only affects EOT(), not IsEOG.
//
// Invariants and concurrency: a *Tokenizer is immutable after New and safe for
// concurrent use by any number of goroutines. Returned slices and strings are
// owned by the caller. A *Stream holds per-generation state and is not safe for
// concurrent use.
package tokenizer

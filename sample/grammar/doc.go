// Package grammar constrains sampling to a GBNF grammar, with llama.cpp's
// syntax and semantics (src/llama-grammar.cpp at 3f545becc), and converts
// JSON schemas to such grammars (common/json-schema-to-grammar.cpp).
//
// Parse reads a grammar: rules `name ::= alternatives`, alternation `|`,
// sequences, groups `( )`, repetitions `*` `+` `?` `{m}` `{m,}` `{m,n}`
// (rewritten into helper rules exactly as llama.cpp does), string literals,
// character classes with ranges and negation `[^a-z]`, `.` (any character),
// escapes `\x` `\u` `\U` `\n` `\r` `\t` `\\` `\"` `\[` `\]`, `#` comments; the
// start rule is `root`. A bad grammar is an error wrapping ErrSyntax that
// names the line and column, an undefined rule or left recursion too.
// Token references (`<[id]>`, `<tok>`) are refused: pipe has no token-level
// grammar elements.
//
// A Matcher is llama.cpp's pushdown matcher over code points: a set of
// stacks of grammar positions, each ending at a character class. Its Apply
// masks a logits row (a token is allowed iff its UTF-8 bytes can be consumed
// from some current stack, a trailing incomplete character iff some stack
// could accept a completion of it; an end-of-generation token iff some stack
// is complete) and Accept advances it past the chosen token. It implements
// sample.Mask. Unlike llama.cpp it takes valid UTF-8 only: a token that
// would spell an overlong form, a surrogate or a code point past U+10FFFF
// is masked, so a constrained answer is always valid text.
//
// A Lazy matcher (llama.cpp's lazy grammar) allows everything until a
// trigger token, word or pattern appears in the output, then replays the
// text from the trigger into its Matcher and masks from there.
//
// Speed: a Vocab (built once per vocabulary and shared) holds every token's
// bytes in sorted order with the common-prefix length to its predecessor, so
// a mask walks the vocabulary like a trie: a prefix no stack accepts skips
// every token under it. Stacks are interned (a stack is an id), and so are
// sets of stacks, and a set's transition by a code point is memoized, so
// after the first steps a byte costs an array lookup; the allowed-token
// bitmap of a set of stacks is cached too (a JSON string's content is one
// set however long the string is).
package grammar

// Package jinja is pipe's fork of github.com/ardanlabs/jinja v1.8.0
// (Apache-2.0, see LICENSE), a pure-Go Jinja engine written for the chat
// templates GGUF files carry. A chat template is a program from the model
// file, so pipe runs it as untrusted code.
//
// The fork was taken unchanged; testdata/golden.json records what upstream
// renders for every real template in testdata (upstream's own, the tiny
// GGUFs' and the repository's testdata/chat-templates) so that later changes
// are proved not to alter real output.
package jinja

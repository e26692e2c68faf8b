package serve

import (
	"slices"

	"github.com/pipe-engine/pipe/decode"
)

// decodeSlot is the server's one decoding session and the gate that lets
// one request at a time use it: a request acquires the slot (acquire, in
// generate.go), rewinds the session to the KV prefix it may reuse (reuse:
// only its own tenant's, see tenant.go) and generates. Everything that
// changes the session or decodes with it holds the slot; only its fixed
// context size (Session.Ctx) is read without it.
type decodeSlot struct {
	sess *decode.Session
	slot chan struct{} // capacity one: held while a request decodes
	met  *meters       // the queue length and busy gauge

	// The KV cache's owner (slot-guarded): who made the request that filled
	// it, and how many of its tokens were that request's prompt.
	owner     tenant
	ownerSeen bool
	ownerLen  int
}

// reuse rewinds the session to the prefix of ids who may reuse (tenant.go)
// and returns its length; it records who as the KV's new owner. It runs in
// the decode slot.
func (s *decodeSlot) reuse(who tenant, ids []int32) int {
	hist := s.sess.Tokens()
	mine := s.ownerSeen && who == s.owner &&
		(who.keyed || (s.ownerLen <= len(hist) && len(ids) >= s.ownerLen && slices.Equal(ids[:s.ownerLen], hist[:s.ownerLen])))
	s.owner, s.ownerSeen, s.ownerLen = who, true, len(ids)
	if !mine {
		return s.sess.Reuse(ids[:1]) // keeps nothing: one token to feed, none shared
	}
	return s.sess.Reuse(ids)
}

package serve

import (
	"crypto/sha256"
	"net/http"
)

// The session's KV cache is shared by every request, and the cached_tokens a
// response reports (and its time to first token) tell how much of the
// prompt it held: reusing any shared prefix would let a client read another
// client's prompt a token at a time. So a request reuses the KV only when it
// comes from the same tenant as the request that filled it, and then:
//
//   - with a prompt_cache_key, any prefix it shares (the client vouches that
//     requests with that key are its own);
//   - without one, only when its prompt begins with the whole of the
//     previous prompt (a conversation going on), which a client can only
//     send if it already knows all of it.
//
// Anything else starts from an empty KV and reports 0 cached tokens.

// tenant identifies who may share a KV cache: the bearer token presented
// and the prompt_cache_key, hashed.
type tenant struct {
	id    [sha256.Size]byte
	keyed bool // a prompt_cache_key was given
}

// tenantOf is the tenant of a request with the given prompt_cache_key.
func tenantOf(r *http.Request, cacheKey string) tenant {
	tok, _ := bearer(r)
	h := sha256.New()
	h.Write([]byte(tok))
	h.Write([]byte{0})
	h.Write([]byte(cacheKey))
	var t tenant
	h.Sum(t.id[:0])
	t.keyed = cacheKey != ""
	return t
}

package replay

import (
	"testing"
)

// streamsTrace: 1 layer, 1 byte per expert, a 2-token prompt, 4 decode
// tokens routing {0,1}, {2,3}, {0,2}, {4,5}.
func streamsTrace() string {
	return mkTrace([]int64{1}, 8, 2, []tok{
		{0, 0, 0, []int{6, 7}}, {0, 1, 0, []int{6, 7}},
		{1, 2, 0, []int{0, 1}}, {1, 3, 0, []int{2, 3}}, {1, 4, 0, []int{0, 2}}, {1, 5, 0, []int{4, 5}},
	})
}

func TestStreamsOneIsTheTrace(t *testing.T) {
	s := compileString(t, streamsTrace())
	one, err := Streams(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []int64{1, 2, 4, 100} {
		a, c := run(t, s, "lru", b, CountDecode, 1), run(t, one, "lru", b, CountDecode, 1)
		if a.BytesRead != c.BytesRead || a.Lookups != c.Lookups || a.Tokens != c.Tokens {
			t.Errorf("budget %d: trace %+v, one stream %+v", b, a, c)
		}
	}
}

// With two streams, step 0 batches tokens 0 and 2 ({0,1} ∪ {0,2}): expert 0
// is looked up once. Steps: {0,1,2}, {2,3,4,5}, {0,2,1}, {4,5,2,3}: 14
// lookups for 8 tokens; with room for everything the misses are the 6
// distinct experts, 6 bytes for 8 tokens against 6 bytes for 4 alone.
func TestStreamsUnionReadOnce(t *testing.T) {
	s := compileString(t, streamsTrace())
	two, err := Streams(s, 2)
	if err != nil {
		t.Fatal(err)
	}
	if two.DecodeTokens != 8 {
		t.Fatalf("decode tokens %d, want 8", two.DecodeTokens)
	}
	r := run(t, two, "lru", 100, CountDecode, 1)
	if r.Lookups != 14 || r.BytesRead != 6 || r.Tokens != 8 {
		t.Fatalf("two streams: %+v, want 14 lookups, 6 bytes, 8 tokens", r)
	}
	solo := run(t, s, "lru", 100, CountDecode, 1)
	if got, want := r.MiBPerToken()/solo.MiBPerToken(), 0.5; got != want {
		t.Fatalf("MiB/token ratio %v, want %v", got, want)
	}
}

func TestStreamsRange(t *testing.T) {
	s := compileString(t, streamsTrace())
	for _, k := range []int{0, -1, MaxStreams + 1} {
		if _, err := Streams(s, k); err == nil {
			t.Errorf("Streams(%d) accepted", k)
		}
	}
}

// On the real Qwen3-30B-A3B trace, four streams share a fraction of their
// experts, so the batch's lookups per token fall below one stream's but stay
// above a quarter of them.
func TestStreamsRealTrace(t *testing.T) {
	s := loadReal(t, "qwen")
	four, err := Streams(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	all := int64(1) << 40
	one := run(t, s, "lru", all, CountDecode, 1)
	r := run(t, four, "lru", all, CountDecode, 1)
	per1 := float64(one.Lookups) / float64(one.Tokens)
	per4 := float64(r.Lookups) / float64(r.Tokens)
	if per4 >= per1 || per4 <= per1/4 {
		t.Fatalf("lookups per token: 4 streams %.2f, 1 stream %.2f", per4, per1)
	}
}

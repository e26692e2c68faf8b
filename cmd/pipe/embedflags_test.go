package main

import (
	"io"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/serve"
)

// TestServeEmbeddingFlags: --embedding (and llama-server's --embeddings)
// turns the embeddings routes on with --pooling's pooling, the model's own
// (none for a model without <arch>.pooling_type) when it is not given, and
// --embd-normalize; --pooling rank or an unknown name is an error naming
// the flag before the model loads, and --rerank stays refused by name.
func TestServeEmbeddingFlags(t *testing.T) {
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		on   bool
		p    model.Pooling
		norm int
	}{
		{nil, false, model.PoolNone, 2},
		{[]string{"--embedding"}, true, model.PoolNone, 2},
		{[]string{"--embeddings", "--pooling", "last", "--embd-normalize", "-1"}, true, model.PoolLast, -1},
		{[]string{"--embedding", "--pooling=mean"}, true, model.PoolMean, 2},
		{[]string{"--embedding", "--pooling", "cls"}, true, model.PoolCLS, 2},
	} {
		args, err := translateArgs(append([]string{"serve", "-m", tinyModel}, c.args...))
		if err == nil {
			_, err = k.Parse(args)
		}
		if err == nil {
			err = cli.Serve.validate()
		}
		var o serve.Options
		if err == nil {
			err = cli.Serve.EmbeddingFlags.apply(&o, f)
		}
		if err != nil || o.Embeddings != c.on || o.Pooling != c.p || o.EmbdNormalize == nil || *o.EmbdNormalize != c.norm {
			t.Errorf("%q: %v, embeddings %v pooling %v norm %v", c.args, err, o.Embeddings, o.Pooling, o.EmbdNormalize)
		}
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--embedding", "--pooling", "rank"}, "--pooling"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--embedding", "--pooling", "max"}, "--pooling"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--rerank"}, "--rerank"},
	} {
		code, stderr := runCode(t, io.Discard, c.args...)
		if code == 0 || !strings.Contains(stderr, c.flag) || strings.Contains(stderr, `"event":"load"`) {
			t.Errorf("pipe %s: exit %d, want an error naming %s before loading; stderr:\n%.600s", strings.Join(c.args, " "), code, c.flag, stderr)
		}
	}
}

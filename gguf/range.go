package gguf

// Range is a byte range of one shard file of a model: the model
// description's expert and dense ranges and the reader's read requests are
// this one type (model.Range and reader.Range name it).
type Range struct {
	Shard int
	Off   int64 // absolute offset in the shard's file
	Len   int64
}

// End returns Off+Len.
func (r Range) End() int64 { return r.Off + r.Len }

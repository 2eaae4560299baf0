package repo

import "sync"

// ChunkSize is the unit of the chunk index: a reader verifies whole
// chunks of this size before returning any byte of them.
const ChunkSize = 1 << 20

// chunkPool recycles 1 MiB buffers so that hashing, copying and serving
// allocate nothing per chunk, whatever the number of concurrent readers.
var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, ChunkSize)
	return &b
}}

func getChunk() *[]byte  { return chunkPool.Get().(*[]byte) }
func putChunk(b *[]byte) { chunkPool.Put(b) }

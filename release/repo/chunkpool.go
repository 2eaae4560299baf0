package repo

import "sync"

// ChunkSize is the unit of the chunk index (SPEC 5.2). Readers verify
// 16 KiB sub-chunks (SubChunkSize), or whole chunks of a file whose
// sub-chunk index is missing.
const ChunkSize = 1 << 20

// chunkPool recycles 1 MiB buffers so that importing and indexing
// allocate nothing per chunk. (Serving allocates the buffers of the units
// it verifies: they may go into the cache, shared by other readers, so
// they are never reused.)
var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, ChunkSize)
	return &b
}}

func getChunk() *[]byte  { return chunkPool.Get().(*[]byte) }
func putChunk(b *[]byte) { chunkPool.Put(b) }

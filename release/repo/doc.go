// Package repo is the founder's release repository: importing a verified
// release tree into the data directory with a chunk index in the store,
// the catalog of imported releases, recovery of an import cut by a crash,
// and the mirror that hands joiners the imported files through a reader
// that verifies every 16 KiB sub-chunk it returns against the index
// before returning any byte of it (SPEC 14: a range hashes only the
// sub-chunks it touches), from disk or from a bounded cache of verified
// sub-chunks shared by all readers.
// The release format itself (manifest, keys, signatures, tree
// verification) is package release; HTTP (ranges, ETags) is httpapi's.
//
// Decisions taken where the specification is silent:
//
//   - The store keeps one small record per release (bucket "releases") and
//     one entry per file with its chunk index (bucket "release-files", key
//     release NUL path), so serving one file reads one file's index, not the
//     whole release. Corrupt marks live in "release-corrupt".
//   - The BLAKE3 hash of each 16 KiB sub-chunk is kept beside the 1 MiB chunk
//     index SPEC 5.2 names, under its own key ("release-subchunks", tied
//     to the import ID), so a request still reads the small chunk index
//     only; the sub-chunk hashes are read once per import of a file.
//     Imports made before it have theirs computed at start
//     (UpgradeIndexes), from bytes checked against the chunk index first.
//     Nothing a joiner sees (manifest, ETag, ranges) changed.
//   - The cache of verified sub-chunks (serve --release-cache; by
//     default an eighth of the memory the process may use, the machine's
//     or its cgroup's limit, at least 256 MiB and at most 2 GiB, so that a
//     rack upgrading at once is served a whole current image from memory)
//     holds the bytes themselves, keyed by import ID, file and
//     position: a re-imported file is never answered from it, and bytes
//     verified once are sent again without re-hashing (cache.go says why
//     that is safe). Go's heap may hold up to about twice the cache size
//     between collections. Units read together share one buffer, counted
//     whole while any of them is cached; a read longer than the cache,
//     alone on its file, reads past it (it would only evict its own units).
//   - The catalog and file index records are MAC-checked once per stored
//     version (store.Remembered), not on every request; readers of a file
//     share its open handle for a few seconds. Neither changes what is
//     verified: every byte sent is hashed or was hashed into the cache.
//   - Re-importing a release with the same manifest replaces it (the way
//     to repair a file marked corrupt); with another manifest it is a
//     CONFLICT unless the caller asks to replace it. The new tree is
//     swapped in, the store records replaced and the corrupt marks cleared
//     in one transaction, then the old tree is removed.
//   - The trusted release keys are the files of DIR/release-keys whose key
//     has a record (bucket "release-keys", MAC'd, keyed by key id): a file
//     alone trusts nothing (SPEC 16.2). The files there at the first start
//     (or offline import) of this build are adopted once, marked in the
//     bucket; later keys are trusted by TrustKey (stratum release
//     trust-key), which writes the file and the record. A file without a
//     record is named, with that command, in the failure of a release it
//     signed, and logged and audited once per key in a process (keys.go).
//   - Before the signature is verified, every failure to read the tree
//     (no such path, not a directory, unreadable, no payload files) gets
//     one answer, so the import endpoint cannot be used to learn what
//     exists on the founder's disk.
package repo

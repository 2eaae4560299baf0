// Package repo is the founder's release repository: importing a verified
// release tree into the data directory with a chunk index in the store,
// the catalog of imported releases, recovery of an import cut by a crash,
// and the mirror that hands joiners the imported files through a reader
// that verifies every 1 MiB chunk against the index before returning it.
// The release format itself (manifest, keys, signatures, tree
// verification) is package release; HTTP (ranges, ETags) is httpapi's.
//
// Decisions taken where the specification is silent:
//
//   - The store keeps one small record per release (bucket "releases") and
//     one entry per file with its chunk index (bucket "release-files", key
//     release NUL path), so serving one file reads one file's index, not the
//     whole release. Corrupt marks live in "release-corrupt".
//   - Re-importing a release with the same manifest replaces it (the way
//     to repair a file marked corrupt); with another manifest it is a
//     CONFLICT unless the caller asks to replace it. The new tree is
//     swapped in, the store records replaced and the corrupt marks cleared
//     in one transaction, then the old tree is removed.
//   - Before the signature is verified, every failure to read the tree
//     (no such path, not a directory, unreadable, no payload files) gets
//     one answer, so the import endpoint cannot be used to learn what
//     exists on the founder's disk.
package repo

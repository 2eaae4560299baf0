// Package backup reads and writes the founder's snapshot files.
//
// A plain snapshot is the store's zstd stream, as it always was. An
// encrypted one is an age file (filippo.io/age, binary, to the operators'
// public keys) whose plaintext is a short header and then that same zstd
// stream:
//
//	stratum-backup v1\n
//	data-key <base64 of the 32-byte data key>\n   (only with --include-data-key)
//	\n
//	<zstd snapshot>
//
// The data key only ever travels inside an encrypted snapshot, so a
// restore onto new hardware needs the snapshot and an identity, nothing
// else. age authenticates every 64 KiB chunk and the end of the stream, so
// a truncated or edited file fails to read rather than restoring something
// else.
package backup

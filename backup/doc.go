// Package backup reads and writes the founder's backup files.
//
// A backup's plaintext is a header, then the body in length-prefixed
// frames, then a MAC:
//
//	stratum-backup v2\n
//	data-key <base64 of the 32-byte data key>\n   (encrypted files only, with --include-data-key)
//	cluster <cluster id>\n
//	ca-pin sha256:<hex>\n
//	store-bytes <size of stratum.db>\n
//	bytes <sum of every entry's size>\n
//	files <number of entries>\n
//	header-mac <hex HMAC-SHA256 of the lines above>\n
//	\n
//	frames: <uint32 big-endian length><that many bytes> ..., then a zero length
//	<32-byte HMAC-SHA256 of the header and every frame's bytes>
//
// The frames carry a zstd-compressed tar stream: stratum.db first, then
// ca.pem, release-keys/... and, unless excluded, releases/.... Both MACs
// are keyed by a key derived from the data key (SPEC 16.4), so nobody
// without it can forge or edit a backup, and the header (the cluster, its
// CA pin and the sizes) is authenticated before the body is read: a
// restore checks the cluster and bounds what it will write before it
// writes anything. The decompressed body is bounded by the header's
// sizes.
//
// A plain backup is that plaintext as it is; an encrypted one is an age
// file (filippo.io/age, to the operators' public keys) of it. age gives
// secrecy, not authenticity: anyone can encrypt to a public key, which is
// why the MAC is there. The data key only ever travels inside an
// encrypted backup.
package backup

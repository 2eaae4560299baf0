package wire

// ProtocolVersion is the version of the shapes in this package and of the
// paths that carry them. Every request of the founder client carries it in
// the ProtocolHeader header, and the founder names its own in every
// answer, so a peer (and a packet capture) can tell which side is older.
// It counts incompatible changes only: a new optional field, a new
// endpoint or a new enum value does not raise it (peers ignore what they
// do not know; the joiner even keeps unknown bundle fields). Nothing is
// refused on it yet: a joiner newer or older than its founder must still
// reach the needs-upgrade answer that tells it what to run.
const ProtocolVersion = 1

// ProtocolHeader is the HTTP header that carries ProtocolVersion, both
// ways.
const ProtocolHeader = "Stratum-Protocol"

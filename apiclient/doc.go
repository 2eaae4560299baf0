// Package apiclient is the one client of the founder's HTTP APIs, used by
// the joiner, the agent, the CLI and the test harness: JSON requests with
// the protocol version (wire.ProtocolHeader), a bearer token or the
// caller's mTLS transport, failover across the replicas of an HA founder,
// retry with capped exponential backoff and jitter (honouring
// Retry-After), the error envelope decoded into *apierr.Error, and size
// limits on what the founder sends. It links no founder code.
package apiclient

// Package agent is `stratum agent` (SPEC 11), run on every joined node
// with the transport leaf the joiner wrote. It trusts the founder exactly
// as the joiner does (the cluster CA's pin and the founder URI SAN of its
// cluster), and it:
//
//   - records the node's release (hostrecord's collectors) at start, every
//     interval with +-10 % jitter, and as soon as the record changes;
//   - long-polls the membership, writes ROOT/etc/stratum/members.json
//     atomically and reports the generation it applied;
//   - serves GET /startupz over mTLS for the founder's boot prober.
//
// Founder errors never stop it: each loop backs off (1 s doubling up to
// the interval) and tries again.
//
// Boot phases (/startupz): "identity" while the leaf and node.yaml are
// read, "record" until the founder accepted a first record, "membership"
// until a first generation was applied, then "serving" (ready). bootMs is
// how long that took from the agent's start.
package agent

// Package wire holds the shapes that cross the network between stratum's
// programs: every request, response and view the founder serves and the
// joiner, the agent, the CLI and the tests read (like Tailscale's tailcfg).
// A shape is written here once; the founder's domain packages and the
// clients use it from here. It imports only the standard library, so the
// node side (joiner, agent) links no founder code and no database.
package wire

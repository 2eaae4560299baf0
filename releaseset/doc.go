// Package releaseset is the release set of SPEC section 6 and the seed
// "release-set": each node's release record, and where the nodes differ
// from each other (skew) or from their own release (drift). It is pure
// domain logic: no HTTP, no storage, no clock (the caller passes Now).
//
// Decisions where the seed and the spec are silent:
//
// Record names. os.imageVersion is the seed's "stratum-os release, on an
// image-mode node" (os-release IMAGE_VERSION); os.baseDigest is the field
// that "identifies the base", a sha256 digest like os.kernelArgsDigest.
// A bootc deployment has image, transport, digest, version, architecture,
// timestamp (the build time, bootc's name) and softRebootCapable. stored is
// {releases: [{release, complete, installed, path, os}], leftovers:
// [{path}]}: each stored release says whether its fetch completed, whether
// the node was installed with it, the directory of its manifest and
// system extensions (path) and its stratum-os layout (os), all relative to
// /var/lib/stratum/upgrade; payloads are [{release, sha256}].
//
// Requests. Unknown fields (matched case-sensitively) are refused at their
// path; null means absent and an empty array means none; times are RFC
// 3339 and kept in UTC; recordedAt in a body is ignored whatever it holds.
// Checked values: runningRelease, payloads[].release, extensions[].release
// and stored.releases[].release are SemVer 2.0.0 without a "v"; bootc
// deployment digests are required and, like os.baseDigest and
// os.kernelArgsDigest when set, are "sha256:" + 64 lowercase hex;
// payloads[].sha256 is 64 lowercase hex; hostBinaries.commit is a commit
// (4 to 64 lowercase hex), "mixed" or "unknown", and want a commit or
// empty; pin state and hostBinaries.source are their enums; counts and
// schema levels are not negative; one package per component; stored paths
// are clean and relative. At most 1000 problems are listed, then a count.
//
// Skew. Only recent records (at most RecentWindow old) count. Values
// compared per field:
//
//   - runningRelease: the release the node runs as nodes[] shows it (its
//     own, else the cluster's), "unknown" when neither is known. It comes
//     before the seed's fields: nodes on different releases are not
//     consistent (the seed: no field differs), and it is what an upgrade
//     changes. Build metadata counts: 0.2.0 and 0.2.0+b1 are two builds.
//   - os: on an image-mode node the booted deployment's digest, displayed
//     as os.imageVersion (else the deployment's version); otherwise
//     os.prettyName, else "id versionId".
//   - imageMode: "true" / "false", displayed "stratum-os image" / "dnf
//     packages".
//   - kernel: os.kernel.
//   - controlPlane: controlPlane.commit, displayed as controlPlane.version.
//   - schema: controlPlane.schemaLevel.
//   - hostBinaries: hostBinaries.commit.
//   - extensions: the merged name@version, sorted, joined by ","; "none".
//   - package:<component>: name@version, or "absent"; components sorted.
//
// A field a record lacks has the value "unknown". Values are listed most
// nodes first (the odd one out last), ties in the order members first
// show them; nodes in member order. When two values share a display, the
// display gets the (shortened) value appended.
//
// Drift entries carry nodeId and kind, then per kind: report: recorded and
// stale (both always), recordedAt when stale; host: field "hostBinaries"
// with source, commit, want, or field "bootc.staged" with image, digest,
// version; pin: field "pins[i]" with name, pinned, running, containers, or
// field "unpinned[i]" with image, containers. Entries go node by node in
// member order, report then host then pin. A node that is not recent gets
// only its report entry: its old record is shown, not judged.
//
// runningRelease is the oldest valid SemVer among members' records, stale
// ones included. consistent is false when there are no members, and
// while a node is behind the admission release (SPEC 17): summary.behind
// names them, over every node, decided once per build of the set like
// the rest of the summary, so a page and the summary agree. The founder
// records the admission release as its own (it runs what it admits
// joiners on); when the admission release moves, by the operator or by
// the joined members' records, the founder's kept record is recorded
// again with it at once (SetAdmission), so the founder is never shown
// behind the release just set.
package releaseset

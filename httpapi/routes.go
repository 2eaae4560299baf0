package httpapi

// The routes tables: every endpoint of a listener, once. A route names
// how its caller is established (Auth) and, for a bearer token, the IAM
// action and the resource it acts on; the router authorizes from these
// before the handler runs and hands the handler who is asking (see
// admit). An action string is written here and in iam's catalog only
// (TestActionsWrittenOnce).

// adminRoutes is the admin API listener's table. The console's HTML
// pages are not API endpoints and are not listed (mountUI).
func (a *API) adminRoutes() []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", Auth: authNone,
			Summary: "Liveness: the process serves and its store answers.", handler: a.healthz},
		{Method: "GET", Path: "/readyz", Auth: authNone,
			Summary: "Readiness: ready, or degraded with each database session that is not a founder holding the cluster's writer lock or lease (its pid).", handler: a.readyz},
		{Method: "GET", Path: "/startupz", Auth: authNone,
			Summary: "Boot progress: state, phase, phase duration, last boot duration.", handler: a.startupz},
		{Method: "GET", Path: "/version", Auth: authNone,
			Summary: "Build version and commit, store schema; the running and admission releases to an authenticated caller.", handler: a.version},
		{Method: "GET", Path: "/openapi.json", Auth: authNone,
			Summary: "This document.", handler: a.openapi},
		{Method: "GET", Path: "/metrics", Auth: authNone,
			Summary: "Prometheus metrics.", handler: a.serveMetrics},
		{Method: "POST", Path: "/v1/auth/login", Auth: authNone,
			Summary: "Log in with email and password; returns a 12-hour bearer token.", handler: a.login},
		{Method: "GET", Path: "/v1/auth/sign-in", Auth: authNone,
			Summary: "What the sign-in page may say before any login: whether the bootstrap admin's generated password is still in the founder's bootstrap-credentials.txt.", handler: a.signInHint},
		{Method: "GET", Path: "/v1/auth/self", Auth: authBearer,
			Summary: "The caller: its subject (the acting session or token), its user and the actions its policy allows on each resource collection (what a console may offer).", handler: a.self},
		{Method: "POST", Path: "/v1/iam/tokens", Auth: authBearer, Action: "iam:CreateToken",
			Summary: "Create an API token with an identity policy.", handler: a.createAPIToken},
		{Method: "GET", Path: "/v1/iam/tokens", Auth: authBearer, Action: "iam:ListTokens",
			Summary: "List API tokens (no secrets).", handler: a.listAPITokens},
		{Method: "DELETE", Path: "/v1/iam/tokens/:tokenId", Auth: authBearer, Action: "iam:RevokeToken", Resource: param("tokenId"),
			Summary: "Revoke an API token and every token made under it.", handler: a.revokeAPIToken},
		{Method: "POST", Path: "/v1/auth/logout", Auth: authBearer,
			Summary: "End the calling login session (and every token made under it).", handler: a.logout},
		{Method: "POST", Path: "/v1/auth/password", Auth: authBearer,
			Summary: "Change the caller's password (at least 12 characters); ends every other session of that user.", handler: a.changePassword},
		{Method: "GET", Path: "/v1/iam/sessions", Auth: authBearer, Action: "iam:ListSessions",
			Summary: "List live login sessions (no secrets).", handler: a.listSessions},
		{Method: "DELETE", Path: "/v1/iam/sessions/:sessionId", Auth: authBearer, Action: "iam:RevokeSession", Resource: param("sessionId"),
			Summary: "End a login session and every token made under it.", handler: a.revokeSession},
		{Method: "GET", Path: "/v1/admin/audit", Auth: authBearer, Action: "audit:ReadAudit",
			Summary: "Read the hash-chained audit log (after=SEQ, limit=N up to 1000).", handler: a.readAudit},
		{Method: "GET", Path: "/v1/admin/audit/verify", Auth: authBearer, Action: "audit:ReadAudit",
			Summary: "Walk the whole audit chain: intact, the number of events, and the first broken link when not.", handler: a.verifyAudit},
		{Method: "GET", Path: "/v1/admin/upgrades/release", Auth: authBearer, Action: "upgrade:DescribeRelease",
			Summary: "The cluster's release set: every node's release, skew and drift (gzip/zstd when accepted).", handler: a.describeReleaseSet},
		{Method: "PUT", Path: "/v1/admin/cluster/release", Auth: authBearer, Action: "upgrade:SetClusterRelease", Resource: fixed("cluster"),
			Summary: "Set the admission release joiners are admitted on; lowering it needs allowDowngrade.", handler: a.setAdmissionRelease},
		{Method: "PUT", Path: "/v1/cluster/nodes/:nodeId/release", Auth: authNodeOrBearer, Action: "upgrade:RecordRelease", Resource: param("nodeId"),
			Summary: "Record a node's release (the node's transport leaf, or a bearer token with upgrade:RecordRelease).", handler: a.recordRelease},
		{Method: "POST", Path: "/v1/admin/join/tokens", Auth: authBearer, Action: "join:CreateJoinToken",
			Summary: "Create a join token; the answer carries the secret and the exact join command once.", handler: a.createJoinToken},
		{Method: "GET", Path: "/v1/admin/join/tokens", Auth: authBearer, Action: "join:ListJoinTokens",
			Summary: "List join tokens (no secrets).", handler: a.listJoinTokens},
		{Method: "DELETE", Path: "/v1/admin/join/tokens/:tokenId", Auth: authBearer, Action: "join:RevokeJoinToken", Resource: param("tokenId"),
			Summary: "Revoke a join token.", handler: a.revokeJoinToken},
		{Method: "GET", Path: "/v1/admin/join/registrations", Auth: authBearer, Action: "join:ListRegistrations",
			Summary: "List registrations (state= filters); with index (from an earlier answer) and wait (seconds, at most 60) it holds until the list differs from that index.", handler: a.listRegistrations},
		{Method: "GET", Path: "/v1/admin/join/registrations/:joinId", Auth: authBearer, Action: "join:GetRegistration", Resource: param("joinId"),
			Summary: "One registration, the operator's view.", handler: a.getRegistration},
		{Method: "POST", Path: "/v1/admin/join/registrations/:joinId/approve", Auth: authBearer, Action: "join:ApproveNodeJoin", Resource: param("joinId"),
			Summary: "Approve a pending registration with its assignment.", handler: a.approveJoin},
		{Method: "POST", Path: "/v1/admin/join/registrations/:joinId/reject", Auth: authBearer, Action: "join:RejectNodeJoin", Resource: param("joinId"),
			Summary: "Reject a pending, needs-upgrade or approved registration.", handler: a.rejectJoin},
		{Method: "POST", Path: "/v1/admin/join/registrations/:joinId/cancel", Auth: authBearer, Action: "join:CancelNodeJoin", Resource: param("joinId"),
			Summary: "Cancel a delivering or installing join: it fails and its member is removed.", handler: a.cancelJoin},
		{Method: "GET", Path: "/v1/admin/cluster/members", Auth: authBearer, Action: "cluster:ListMembers",
			Summary: "The members and the current membership generation.", handler: a.listMembers},
		{Method: "POST", Path: "/v1/admin/cluster/members/:nodeId/remove", Auth: authBearer, Action: "cluster:RemoveMember", Resource: param("nodeId"),
			Summary: "Remove a member for good (a node that is gone), with a reason: the generation is bumped, its certificate and OpenBao node token stop counting, its release record and addresses are freed, and a join it held completes. Not the founder, nor a member whose join is delivering or installing (cancel that join). Answers the member as it was.", handler: a.removeMember},
		{Method: "GET", Path: "/v1/cluster/members", Auth: authNode,
			Summary: "A node's membership long-poll (its transport leaf): the members list, answered when the generation differs from generation or wait (seconds, at most 60) passes.", handler: a.watchMembers},
		{Method: "PUT", Path: "/v1/cluster/members/:nodeId/applied", Auth: authNode,
			Summary: "A node reports the membership generation it applied (its transport leaf; CommonName must equal nodeId).", handler: a.reportApplied},
		{Method: "POST", Path: "/v1/cluster/nodes/:nodeId/leaf", Auth: authNode,
			Summary: "A node renews its transport leaf (with its current one; CommonName must equal nodeId): body {publicKey (PEM, ECDSA P-256)}; answers {certificate (PEM), notAfter}, a leaf naming what the current one names for 365 days, audited cluster.node.leaf.renewed. Both count until the node first uses the new one; from then on only the new one does.", handler: a.renewNodeLeaf},
		{Method: "POST", Path: "/v1/admin/releases", Auth: authBearer, Action: "upgrade:ImportRelease",
			Summary: "Import a signed release tree from a path on the founder (verified against DIR/release-keys).", handler: a.importRelease},
		{Method: "POST", Path: "/v1/admin/releases/upload", Auth: authBearer, Action: "upgrade:ImportRelease",
			Summary: "Upload a signed release tree as a tar stream (payload/manifest.json and payload/manifest.sig first, then the listed files): the signature is verified before anything else is received, every file is checked against the manifest, nothing is kept unless all verify. Query replace=true replaces a release of the same version whose content differs.", handler: a.uploadRelease},
		{Method: "GET", Path: "/v1/admin/releases", Auth: authBearer, Action: "upgrade:DescribeRelease",
			Summary: "List imported releases.", handler: a.listReleases},
		{Method: "GET", Path: "/v1/admin/releases/:release", Auth: authBearer, Action: "upgrade:DescribeRelease", Resource: param("release"),
			Summary: "One imported release.", handler: a.getRelease},
		{Method: "GET", Path: "/v1/admin/release-keys", Auth: authBearer, Action: "upgrade:DescribeRelease",
			Summary: "The key files of DIR/release-keys, each with its key id and whether it is trusted (SPEC 16.2: a file counts only once trusted).", handler: a.listReleaseKeys},
		{Method: "POST", Path: "/v1/admin/release-keys", Auth: authBearer, Action: "upgrade:TrustReleaseKey",
			Summary: "Trust a release public key: body {name (NAME.pub), publicKey (PEM)}; the founder writes DIR/release-keys/NAME.pub (a different key under that name is refused) and records the key (audited release.key.trusted).", handler: a.trustReleaseKey},
	}
}

// joinRoutes is the join listener's table: the joiner's key is its only
// identity.
func (a *API) joinRoutes() []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", Auth: authNone,
			Summary: "Liveness of the join listener.", handler: a.healthz},
		{Method: "POST", Path: "/v1/join/registrations", Auth: authJoinerKey,
			Summary: "Register with a join token; pinned to the client certificate's key.", handler: a.register},
		{Method: "GET", Path: "/v1/join/registrations/:joinId", Auth: authJoinerKey,
			Summary: "The joiner's view, long-polled with wait (seconds, at most 60) and state (the state last seen).", handler: a.pollRegistration},
		{Method: "POST", Path: "/v1/join/registrations/:joinId/progress", Auth: authJoinerKey,
			Summary: "Report delivery progress: installing, done or failed.", handler: a.reportProgress},
		{Method: "GET", Path: "/v1/join/registrations/:joinId/release/*path", Auth: authJoinerKey,
			Summary: "A file of the offered release, while needs-upgrade; ranges, ETag, hash-verified.", handler: a.serveReleaseFile},
		{Method: "HEAD", Path: "/v1/join/registrations/:joinId/release/*path", Auth: authJoinerKey,
			Summary: "Headers of a file of the offered release.", handler: a.serveReleaseFile},
	}
}

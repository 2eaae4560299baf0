package httpapi

import (
	"crypto/x509"
	"net/http"
	"strings"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/iam"
)

// principal authenticates the bearer token of r.
func (a *API) principal(r *http.Request) (iam.Principal, error) {
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || token == "" {
		return iam.Principal{}, apierr.New(apierr.Unauthenticated, "missing bearer token: log in with POST /v1/auth/login")
	}
	return a.Identity.Authenticate(token)
}

// authorize authenticates r and checks action on resource: 401 before 403.
func (a *API) authorize(r *http.Request, action, resource string) (iam.Principal, error) {
	p, err := a.principal(r)
	if err != nil {
		return p, err
	}
	if p.MustChangePassword {
		return p, iam.PasswordChangeFirst()
	}
	return p, p.Authorize(action, resource)
}

// nodeLeaf returns the node id of a CA-issued client certificate (its
// CommonName), or "" when the request carries none. The TLS layer has
// already verified the chain against the cluster CA; that is not enough
// (SPEC 10.3): the leaves of cancelled or failed joins still chain, so
// the certificate must be the one delivered to a member whose join is
// installing or joined. Every node endpoint passes through here.
func (a *API) nodeLeaf(r *http.Request) (string, error) {
	leaf := verifiedLeaf(r)
	if leaf == nil {
		return "", nil
	}
	node := leaf.Subject.CommonName
	return node, a.NodeLeaves.CheckNodeLeaf(node, cluster.LeafSerial(leaf))
}

// verifiedLeaf is r's client certificate when the TLS layer verified it
// against the cluster CA, else nil.
func verifiedLeaf(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	return r.TLS.VerifiedChains[0][0]
}

// JoinerPin is the SHA-256 pin of the joiner's client certificate key,
// the only identity on the join listener.
func JoinerPin(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", apierr.New(apierr.Unauthenticated, "the join listener needs a client certificate")
	}
	return crypto.SPKIPin(r.TLS.PeerCertificates[0]), nil
}

// nodeOrBearer authorizes a node endpoint: a CA-issued client certificate
// whose CommonName is node, or a bearer token allowed action on resource.
// A node certificate for another node is FORBIDDEN, never a fallback to
// the bearer token. It returns the actor for the audit log.
func (a *API) nodeOrBearer(r *http.Request, node, action, resource string) (string, error) {
	cn, err := a.nodeLeaf(r)
	if err != nil {
		return "", err
	}
	if cn != "" {
		if cn != node {
			return "", apierr.New(apierr.Forbidden, "node %s may not act for node %s (%s)", cn, node, action)
		}
		return "node:" + cn, nil
	}
	p, err := a.authorize(r, action, resource)
	if err != nil {
		return "", err
	}
	return p.Subject, nil
}

// requireNode accepts only a node's transport leaf, of node itself when
// node is not empty; it returns the leaf's node id.
func (a *API) requireNode(r *http.Request, node string) (string, error) {
	cn, err := a.nodeLeaf(r)
	if err != nil {
		return "", err
	}
	if cn == "" {
		return "", apierr.New(apierr.Unauthenticated, "this endpoint needs the node's transport certificate, issued by the cluster CA")
	}
	if node != "" && cn != node {
		return "", apierr.New(apierr.Forbidden, "node %s may not report for node %s", cn, node)
	}
	return cn, nil
}

// authenticated reports whether r carries a valid bearer token or a
// node leaf that counts; an open endpoint uses it to decide what to show.
func (a *API) authenticated(r *http.Request) bool {
	if node, err := a.nodeLeaf(r); err == nil && node != "" {
		return true
	}
	p, err := a.principal(r)
	return err == nil && !p.MustChangePassword
}

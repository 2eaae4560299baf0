package joiner

import (
	"bytes"
	"fmt"
	"net"
	"strings"

	"stratum/wire"
)

// envLine is one KEY=value line of an environment file.
type envLine struct{ key, value string }

// renderEnv writes KEY=value lines, unquoted. Both readers of these files
// take such a line literally: podman's --env-file never unquotes, and
// systemd's EnvironmentFile= only unquotes values that start with a quote,
// which the cluster's generated values (letters, digits, base64url, hex,
// host names) never do. A value with a line break cannot be represented
// and is refused, naming the key, never the value.
func renderEnv(lines []envLine) ([]byte, error) {
	var b bytes.Buffer
	for _, l := range lines {
		if strings.ContainsAny(l.value, "\n\r\x00") {
			return nil, fmt.Errorf("%s: the value holds a line break or NUL and cannot go into an environment file", l.key)
		}
		fmt.Fprintf(&b, "%s=%s\n", l.key, l.value)
	}
	return b.Bytes(), nil
}

// defaultAdminEmail is the founder default a bundle without adminEmail
// (a founder that predates the field) implies, per the seed.
const defaultAdminEmail = "admin@stratum.local"

// openBaoPort is OpenBao's listener port behind the VIP.
const openBaoPort = "8200"

// controlPlaneEnv is controlplane.env: the cluster identity the control
// plane adopts, and the shared admin and OpenBao credentials. A Postgres
// replica gets no admin or OpenBao lines when the founder sent none (it
// runs no control plane); any role gets no line for a credential the
// founder left empty, since an empty value would override a default.
func controlPlaneEnv(b *wire.Bundle, nodeID string) []envLine {
	var l []envLine
	postgresOnly := b.Role == "postgres"
	if b.AdminPassword != "" || !postgresOnly {
		email := b.AdminEmail
		if email == "" {
			email = defaultAdminEmail
		}
		l = append(l, envLine{"STRATUM_IAM_ADMIN_EMAIL", email})
	}
	if b.AdminPassword != "" {
		l = append(l, envLine{"STRATUM_IAM_ADMIN_PASSWORD", b.AdminPassword})
	}
	if b.OpenBaoToken != "" {
		l = append(l, envLine{"STRATUM_OPENBAO_TOKEN", b.OpenBaoToken})
	}
	if b.VIPs != nil && b.VIPs.OpenBao != "" && (b.OpenBaoToken != "" || !postgresOnly) {
		l = append(l, envLine{"STRATUM_OPENBAO_ADDR", "https://" + net.JoinHostPort(b.VIPs.OpenBao, openBaoPort)})
	}
	return append(l,
		envLine{"STRATUM_PARENT_DOMAIN", b.ParentDomain},
		envLine{"STRATUM_REGION", b.Region},
		envLine{"STRATUM_CLUSTER_ID", b.ClusterID},
		envLine{"STRATUM_NODE_ID", nodeID},
	)
}

// bootstrapCredentials mirrors the founder's file: email= and password=.
func bootstrapCredentials(b *wire.Bundle) []byte {
	if b.AdminPassword == "" {
		return nil
	}
	email := b.AdminEmail
	if email == "" {
		email = defaultAdminEmail
	}
	return fmt.Appendf(nil, "email=%s\npassword=%s\n", email, b.AdminPassword)
}

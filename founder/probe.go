package founder

import (
	"crypto/tls"
	"net/url"
	"time"

	"stratum/bootprobe"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/join"
	"stratum/store"
)

// newProber builds the boot-health prober with a client leaf of its own:
// the listeners' leaf is server-only, and an agent asks for a client
// certificate of the cluster CA.
func (f *Founder) newProber() (*bootprobe.Prober, error) {
	client, err := newRenewingCert("prober", func(now time.Time) (tls.Certificate, error) {
		leaf, err := f.ca.Issue(crypto.LeafRequest{CommonName: "stratum founder prober",
			URIs: []*url.URL{crypto.FounderURI(f.id.ClusterID)}, Client: true, Validity: 90 * 24 * time.Hour}, now)
		if err != nil {
			return tls.Certificate{}, err
		}
		return tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	}, time.Now, f.log)
	if err != nil {
		return nil, err
	}
	return bootprobe.New(bootprobe.Config{
		Members: f.probeTargets, Self: f.id.FounderNodeID, SelfBoot: f.ownBoot,
		ClientCert: client.client, CAs: f.ca.Pool(), Port: f.opts.AgentPort, Interval: f.opts.ProbeInterval, Log: f.log,
	})
}

// probeTargets are the members in joining or active.
func (f *Founder) probeTargets() ([]bootprobe.Target, error) {
	var out []bootprobe.Target
	err := f.db.View(func(tx *store.Tx) error {
		members, err := cluster.Members(tx)
		for _, m := range members {
			if m.State == cluster.MemberJoining || m.State == cluster.MemberActive {
				out = append(out, bootprobe.Target{NodeID: m.NodeID, MgmtIP: m.MgmtIP})
			}
		}
		return err
	})
	return out, err
}

// ownBoot is the founder's own boot health: its /startupz clock.
func (f *Founder) ownBoot() cluster.Boot {
	s := f.startup.Snapshot()
	return cluster.Boot{State: s.State(), Phase: s.Phase, PhaseMs: s.PhaseMs, LastBootMs: s.BootMs}
}

// bootHealth is the prober for the join views, nil when it is off (a nil
// *Prober in the interface would not read as "off").
func (f *Founder) bootHealth() join.BootHealth {
	if f.prober == nil {
		return nil
	}
	return f.prober
}

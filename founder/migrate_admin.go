package founder

import (
	"stratum/cluster"
	"stratum/iam"
	"stratum/store"
)

// migrateApplianceAdmin is the founder's step of migration 10: an earlier
// build made the appliance's bootstrap admin log in with the cluster
// secret it delivers to nodes (SPEC 16.1). Where that is still the
// password, the account must change it.
var _ = store.Provide(store.StepFounderApplianceAdmin, migrateApplianceAdmin)

func migrateApplianceAdmin(tx *store.Tx) error {
	if !cluster.Initialized(tx) {
		return nil
	}
	id, err := cluster.LoadIdentity(tx)
	if err != nil {
		return err
	}
	sec, err := cluster.LoadSecrets(tx)
	if err != nil {
		return err
	}
	_, err = iam.MarkMustChangeIfPassword(tx, id.AdminEmail, sec.AdminPassword, "its password is the cluster admin secret delivered to nodes")
	return err
}

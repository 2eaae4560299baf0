package founder

import (
	"stratum/cluster"
	"stratum/iam"
	"stratum/store"
)

// applianceAdminMigration: an earlier build made the appliance's bootstrap
// admin log in with the cluster secret it delivers to nodes (SPEC 16.1).
// Where that is still the password, the account must change it.
var applianceAdminMigration = store.Migration{Version: 12, Name: "appliance admin no longer shares the delivered cluster admin password", Apply: migrateApplianceAdmin}

func init() { store.AddMigration(applianceAdminMigration) }

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

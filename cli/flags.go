package cli

import (
	"github.com/spf13/pflag"

	"stratum/founder"
	"stratum/tpm"
)

// keyFlags are --tpm and --tpm-pcrs: where the founder's data key is
// sealed (see founder.KeySource).
type keyFlags struct{ tpm, pcrs *string }

func addKeyFlags(fs *pflag.FlagSet, tpmUse string) keyFlags {
	return keyFlags{
		tpm:  fs.String("tpm", "", tpmUse),
		pcrs: fs.String("tpm-pcrs", "7", "SHA-256 PCRs the data key is sealed to, comma-separated (with --tpm)"),
	}
}

func (k keyFlags) source() (founder.KeySource, error) {
	pcrs, err := tpm.ParsePCRs(*k.pcrs)
	if err != nil {
		return founder.KeySource{}, usagef("--tpm-pcrs: %w", err)
	}
	return founder.KeySource{TPM: *k.tpm, PCRs: pcrs}, nil
}

// storeFlag is --store (env STRATUM_STORE): a postgres:// DSN puts the
// founder's state in a database several replicas share (docs/HA.md).
func storeFlag(fs *pflag.FlagSet) *string {
	return fs.String("store", "", "postgres://USER:PASSWORD@HOST:PORT/DB to keep the state in PostgreSQL (HA replicas); default the bbolt file in --data. It holds the password, which ps shows: set STRATUM_STORE instead")
}

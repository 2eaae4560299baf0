package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"stratum/founder"
	"stratum/tpm"
)

// newFlagSet returns a flag set whose parse errors are reported once.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("stratum "+name, flag.ContinueOnError)
	return fs
}

// parseFlags parses args, letting every flag default from its STRATUM_*
// environment twin (--api-addr -> STRATUM_API_ADDR) first.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if noEnvTwin[f.Name] {
			return
		}
		env := envTwin(fs.Name(), f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = errors.New(env + ": " + err.Error())
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(flagsFirst(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		return errUsage
	}
	return nil
}

// flagsFirst moves positional arguments after the flags, so
// `joins approve j-123 --label a=b` parses like the flag package expects.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), positional...)
}

// noEnvTwin are the flags an environment variable must not set: each
// weakens a safety rule, so it has to be typed on the command line where
// the operator sees it (a variable left in a shell would silently allow
// every later downgrade).
var noEnvTwin = map[string]bool{"allow-downgrade": true, "insecure-store-unseal-key": true}

// envTwin names a flag's environment twin: STRATUM_ + the flag name. The
// join token is STRATUM_JOIN_TOKEN, because STRATUM_TOKEN is the admin
// commands' bearer token and an operator shell may hold both.
func envTwin(command, flagName string) string {
	if command == "stratum join" && flagName == "token" {
		return "STRATUM_JOIN_TOKEN"
	}
	return "STRATUM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// keyFlags are --tpm and --tpm-pcrs: where the founder's data key is
// sealed (see founder.KeySource).
type keyFlags struct{ tpm, pcrs *string }

func addKeyFlags(fs *flag.FlagSet, tpmUse string) keyFlags {
	return keyFlags{
		tpm:  fs.String("tpm", "", tpmUse),
		pcrs: fs.String("tpm-pcrs", "7", "SHA-256 PCRs the data key is sealed to, comma-separated (with --tpm)"),
	}
}

func (k keyFlags) source() (founder.KeySource, error) {
	pcrs, err := tpm.ParsePCRs(*k.pcrs)
	if err != nil {
		return founder.KeySource{}, fmt.Errorf("--tpm-pcrs: %w", err)
	}
	return founder.KeySource{TPM: *k.tpm, PCRs: pcrs}, nil
}

// storeFlag is --store (env STRATUM_STORE): a postgres:// DSN puts the
// founder's state in a database several replicas share (docs/HA.md).
func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", "", "postgres://USER:PASSWORD@HOST:PORT/DB to keep the state in PostgreSQL (HA replicas); default the bbolt file in --data")
}

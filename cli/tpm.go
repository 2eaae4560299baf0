package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"stratum/founder"
	"stratum/tpm"
)

func init() { Register(newTPMCmd) }

func newTPMCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tpm", Short: "TPM sealing: seal|unseal a node secret; convert|recover the founder's data key"}

	seal := &cobra.Command{Use: "seal --in FILE|- --out FILE", Short: "seal a secret to this machine's TPM", Args: cobra.NoArgs}
	in := seal.Flags().String("in", "", "file holding the secret, or - for stdin (one trailing newline is dropped)")
	out := seal.Flags().String("out", "", "where to write the sealed blob (written atomically, mode 0600)")
	sealTPM := seal.Flags().String("tpm", tpm.DefaultPath, "TPM character device or swtpm unix socket")
	pcrFlag := seal.Flags().String("pcrs", "7", "comma-separated SHA-256 PCRs the secret is bound to")
	_ = seal.MarkFlagRequired("in")
	_ = seal.MarkFlagRequired("out")
	seal.RunE = func(*cobra.Command, []string) error {
		pcrs, err := tpm.ParsePCRs(*pcrFlag)
		if err != nil {
			return usagef("--pcrs: %w", err)
		}
		secret, err := readSecret(*in)
		if err != nil {
			return err
		}
		defer clear(secret)
		return tpm.SealToFile(*sealTPM, pcrs, secret, *out)
	}

	unseal := &cobra.Command{Use: "unseal --in FILE", Short: "print a sealed secret (the node's unseal service)", Args: cobra.NoArgs}
	unsealIn := unseal.Flags().String("in", "", "sealed blob written by stratum tpm seal or the joiner")
	unsealTPM := unseal.Flags().String("tpm", tpm.DefaultPath, "TPM character device or swtpm unix socket")
	_ = unseal.MarkFlagRequired("in")
	unseal.RunE = func(cmd *cobra.Command, _ []string) error {
		secret, err := tpm.UnsealFile(*unsealTPM, *unsealIn)
		if tpm.NeedsRecovery(err) {
			return fmt.Errorf("%w; %s", err, unsealKeyHint)
		}
		if err != nil {
			return err
		}
		defer clear(secret)
		line := append(secret, '\n')
		defer clear(line)
		_, err = cmd.OutOrStdout().Write(line)
		return err
	}

	convert := &cobra.Command{Use: "convert --data DIR", Short: "move the founder's plain data.key into its TPM", Args: cobra.NoArgs}
	convertData := convert.Flags().String("data", "./data", "founder data directory holding data.key")
	convertKeys := addKeyFlags(convert.Flags(), "TPM to seal the data key to (default /dev/tpmrm0)")
	convert.RunE = func(cmd *cobra.Command, _ []string) error {
		return runTPMConvert(cmd.OutOrStdout(), *convertData, convertKeys)
	}

	recover := &cobra.Command{Use: "recover --data DIR --recovery-key -|--recovery-key-file FILE", Short: "get the founder's data key back with its recovery key", Args: cobra.NoArgs}
	recoverData := recover.Flags().String("data", "./data", "founder data directory")
	keyArg := recover.Flags().String("recovery-key", "", "- to read the recovery key (printed when the key was sealed) from stdin; never the key itself (ps and shell history would show it)")
	keyFile := recover.Flags().String("recovery-key-file", "", "file holding the recovery key (its first line)")
	recover.MarkFlagsMutuallyExclusive("recovery-key", "recovery-key-file")
	toFile := recover.Flags().Bool("to-file", false, "write data.key back instead of resealing (no TPM left)")
	recoverKeys := addKeyFlags(recover.Flags(), "TPM to reseal the data key to (default /dev/tpmrm0)")
	recover.MarkFlagsMutuallyExclusive("to-file", "tpm")
	recover.RunE = func(cmd *cobra.Command, _ []string) error {
		var rk string
		if *keyFile != "" {
			b, err := os.ReadFile(*keyFile)
			if err != nil {
				return fmt.Errorf("read the recovery key: %w", err)
			}
			if rk, _, _ = strings.Cut(string(b), "\n"); strings.TrimSpace(rk) == "" {
				return fmt.Errorf("read the recovery key: the first line of %s is empty", *keyFile)
			}
		} else {
			var err error
			if rk, err = readRecoveryKey(*keyArg); err != nil {
				return err
			}
		}
		return runTPMRecover(cmd.OutOrStdout(), *recoverData, rk, *toFile, recoverKeys)
	}

	cmd.AddCommand(seal, unseal, convert, recover)
	return cmd
}

// runTPMConvert moves a founder's plain data.key into its TPM.
func runTPMConvert(stdout io.Writer, data string, keys keyFlags) error {
	ks, err := keys.source()
	if err != nil {
		return err
	}
	if ks.TPM == "" {
		ks.TPM = tpm.DefaultPath
	}
	d := founder.DataDir(data)
	rk, err := d.ConvertToTPM(ks)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the data key is sealed to the TPM at %s (PCRs %s) in %s; %s was removed\n", ks.TPM, *keys.pcrs, d.DataKeyTPM(), d.DataKey())
	founder.PrintRecoveryKey(stdout, rk)
	return nil
}

// runTPMRecover gets the founder's data key back with its recovery key.
func runTPMRecover(stdout io.Writer, data, rk string, toFile bool, keys keyFlags) error {
	ks, err := keys.source()
	if err != nil {
		return err
	}
	if ks.TPM == "" {
		ks.TPM = tpm.DefaultPath
	}
	d := founder.DataDir(data)
	if err := d.Recover(founder.RecoverOptions{RecoveryKey: rk, Keys: ks, ToFile: toFile}); err != nil {
		return err
	}
	if toFile {
		fmt.Fprintf(stdout, "the data key is back in %s (mode 0600); the sealed copy and the recovery file were removed\n", d.DataKey())
		return nil
	}
	fmt.Fprintf(stdout, "the data key is resealed to the TPM at %s (PCRs %s) in %s; the recovery key stays the same\n", ks.TPM, *keys.pcrs, d.DataKeyTPM())
	return nil
}

// readRecoveryKey reads the key from stdin for --recovery-key -. The
// key itself as the flag's value is refused (SPEC 16.10): it would be in
// shell history and the process list, and the refusal does not repeat it.
func readRecoveryKey(arg string) (string, error) {
	switch arg {
	case "":
		return "", usagef("--recovery-key - (read from stdin) or --recovery-key-file FILE is required")
	case "-":
	default:
		return "", usagef("--recovery-key takes only - (the key is then read from stdin) or use --recovery-key-file FILE: " +
			"the key itself on the command line would stay in shell history and show in ps; nothing was changed")
	}
	if term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprint(os.Stderr, "recovery key: ")
	}
	line, err := bufio.NewReader(io.LimitReader(os.Stdin, 1024)).ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		return "", fmt.Errorf("read the recovery key from stdin: %w", err)
	}
	return line, nil
}

// unsealKeyHint is the way out for a node whose sealed OpenBao unseal key
// no longer opens (the boot unseal service runs `stratum tpm unseal`).
const unsealKeyHint = "re-deliver the unseal key from the cluster, or re-seal it with `stratum tpm seal`"

// maxSecretInput is generous next to the TPM's 128-byte limit (Seal gives
// the precise error) and stops a wrong --in from being read whole.
const maxSecretInput = 4096

// readSecret reads the secret and drops one trailing newline, since keys
// are usually stored or piped with one and it is never part of the key.
func readSecret(name string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSecretInput+1))
	if err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	if len(b) > maxSecretInput {
		clear(b)
		return nil, fmt.Errorf("secret input is over %d bytes; is --in the right file?", maxSecretInput)
	}
	if bytes.HasSuffix(b, []byte("\r\n")) {
		b = b[:len(b)-2]
	} else if bytes.HasSuffix(b, []byte("\n")) {
		b = b[:len(b)-1]
	}
	return b, nil
}

package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"stratum/founder"
	"stratum/tpm"
)

func init() {
	Register(Command{
		Name:    "tpm",
		Summary: "TPM sealing: tpm seal|unseal a node secret; tpm convert|recover the founder's data key",
		Run:     runTPM,
	})
}

const tpmUsage = `usage:
  stratum tpm seal --in FILE|- --out FILE [--tpm PATH] [--pcrs 7]
  stratum tpm unseal --in FILE [--tpm PATH]
  stratum tpm convert --data DIR [--tpm PATH] [--tpm-pcrs 7]
  stratum tpm recover --data DIR --recovery-key KEY|- [--tpm PATH] [--tpm-pcrs 7] [--to-file]`

func runTPM(_ context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, tpmUsage)
		return errUsage
	}
	switch args[0] {
	case "seal":
		return runTPMSeal(args[1:])
	case "unseal":
		return runTPMUnseal(args[1:])
	case "convert":
		return runTPMConvert(args[1:])
	case "recover":
		return runTPMRecover(args[1:])
	case "help", "-h", "--help":
		fmt.Fprintln(os.Stderr, tpmUsage)
		return nil
	default:
		fmt.Fprintf(os.Stderr, "stratum tpm: unknown subcommand %q\n%s\n", args[0], tpmUsage)
		return errUsage
	}
}

func runTPMSeal(args []string) error {
	fs := newFlagSet("tpm seal")
	in := fs.String("in", "", "file holding the secret, or - for stdin (one trailing newline is dropped)")
	out := fs.String("out", "", "where to write the sealed blob (written atomically, mode 0600)")
	path := fs.String("tpm", tpm.DefaultPath, "TPM character device or swtpm unix socket")
	pcrFlag := fs.String("pcrs", "7", "comma-separated SHA-256 PCRs the secret is bound to")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "stratum tpm seal: --in and --out are required and no arguments are taken")
		return errUsage
	}
	pcrs, err := tpm.ParsePCRs(*pcrFlag)
	if err != nil {
		return fmt.Errorf("--pcrs: %w", err)
	}
	secret, err := readSecret(*in)
	if err != nil {
		return err
	}
	defer clear(secret)
	return tpm.SealToFile(*path, pcrs, secret, *out)
}

func runTPMUnseal(args []string) error {
	fs := newFlagSet("tpm unseal")
	in := fs.String("in", "", "sealed blob written by `stratum tpm seal` or the joiner")
	path := fs.String("tpm", tpm.DefaultPath, "TPM character device or swtpm unix socket")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "stratum tpm unseal: --in is required and no arguments are taken")
		return errUsage
	}
	secret, err := tpm.UnsealFile(*path, *in)
	if tpm.NeedsRecovery(err) {
		return fmt.Errorf("%w; %s", err, unsealKeyHint)
	}
	if err != nil {
		return err
	}
	defer clear(secret)
	line := append(secret, '\n')
	defer clear(line)
	_, err = os.Stdout.Write(line)
	return err
}

// runTPMConvert moves a founder's plain data.key into its TPM.
func runTPMConvert(args []string) error {
	fs := newFlagSet("tpm convert")
	data := fs.String("data", "./data", "founder data directory holding data.key")
	keys := addKeyFlags(fs, "TPM to seal the data key to (default /dev/tpmrm0)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errUsage
	}
	ks, err := keys.source()
	if err != nil {
		return err
	}
	if ks.TPM == "" {
		ks.TPM = tpm.DefaultPath
	}
	d := founder.DataDir(*data)
	rk, err := d.ConvertToTPM(ks)
	if err != nil {
		return err
	}
	fmt.Printf("the data key is sealed to the TPM at %s (PCRs %s) in %s; %s was removed\n", ks.TPM, *keys.pcrs, d.DataKeyTPM(), d.DataKey())
	founder.PrintRecoveryKey(os.Stdout, rk)
	return nil
}

// runTPMRecover gets the founder's data key back with its recovery key.
func runTPMRecover(args []string) error {
	fs := newFlagSet("tpm recover")
	data := fs.String("data", "./data", "founder data directory")
	keyArg := fs.String("recovery-key", "", "the recovery key printed when the key was sealed, or - to read it from stdin")
	toFile := fs.Bool("to-file", false, "write data.key back instead of resealing (no TPM left)")
	keys := addKeyFlags(fs, "TPM to reseal the data key to (default /dev/tpmrm0)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errUsage
	}
	if *toFile && *keys.tpm != "" {
		return errors.New("--to-file and --tpm exclude each other")
	}
	ks, err := keys.source()
	if err != nil {
		return err
	}
	if ks.TPM == "" {
		ks.TPM = tpm.DefaultPath
	}
	rk, err := readRecoveryKey(*keyArg)
	if err != nil {
		return err
	}
	d := founder.DataDir(*data)
	if err := d.Recover(founder.RecoverOptions{RecoveryKey: rk, Keys: ks, ToFile: *toFile}); err != nil {
		return err
	}
	if *toFile {
		fmt.Printf("the data key is back in %s (mode 0600); the sealed copy and the recovery file were removed\n", d.DataKey())
		return nil
	}
	fmt.Printf("the data key is resealed to the TPM at %s (PCRs %s) in %s; the recovery key stays the same\n", ks.TPM, *keys.pcrs, d.DataKeyTPM())
	return nil
}

// readRecoveryKey takes the key from the flag, or from stdin for "-" so
// it stays out of shell history and the process list.
func readRecoveryKey(arg string) (string, error) {
	switch arg {
	case "":
		return "", errors.New("--recovery-key is required (- reads it from stdin)")
	case "-":
	default:
		return arg, nil
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

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"stratum/apierr"
	"stratum/founder"
	"stratum/release"
	"stratum/release/repo"
	"stratum/store"
)

func init() {
	Register(Command{Name: "release", Summary: "release tooling: keygen, sign, verify, import, list", Run: runRelease})
}

const releaseUsageText = `usage: stratum release <subcommand> [flags]

  keygen --out NAME                          write NAME.key (0600) and NAME.pub
  sign --key NAME.key --release V [--upgrades-from V1,V2] DIR
                                             write DIR/payload/manifest.json and add a signature
  verify --keys KEYDIR [--threshold N] DIR   check the signature and every file
  import --data DIR [--threshold N] SRC      verify SRC against DIR/release-keys/ and import it
  list --data DIR                            list the imported releases`

func runRelease(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, releaseUsageText)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "keygen":
		return releaseKeygen(rest)
	case "sign":
		return releaseSign(rest)
	case "verify":
		return releaseVerify(rest)
	case "import":
		return releaseImport(ctx, rest)
	case "list":
		return releaseList(rest)
	case "help", "-h", "--help":
		fmt.Fprintln(os.Stdout, releaseUsageText)
		return nil
	}
	fmt.Fprintf(os.Stderr, "stratum release: unknown subcommand %q\n\n%s\n", sub, releaseUsageText)
	return errUsage
}

// releaseArgs parses flags that may come before or after the positional
// arguments ("verify DIR --keys K" reads as well as "verify --keys K DIR").
func releaseArgs(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var pos []string
	for rest := fs.Args(); len(rest) > 0; rest = fs.Args() {
		pos = append(pos, rest[0])
		if err := fs.Parse(rest[1:]); err != nil {
			return nil, errUsage
		}
	}
	if len(pos) != positional {
		fmt.Fprintf(os.Stderr, "%s: want %d argument(s), got %d\n", fs.Name(), positional, len(pos))
		fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

// releaseErr turns a domain error into the sentence a person acts on.
func releaseErr(err error) error {
	if e, ok := apierr.As(err); ok {
		return errors.New(e.Message)
	}
	return err
}

func releaseKeygen(args []string) error {
	fs := newFlagSet("release keygen")
	out := fs.String("out", "", "key pair name: writes NAME.key and NAME.pub")
	if _, err := releaseArgs(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out NAME is required")
	}
	id, err := release.Keygen(*out)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s.key (secret, mode 0600) and %s.pub\nkeyId %s\n", *out, *out, id)
	return nil
}

func releaseSign(args []string) error {
	fs := newFlagSet("release sign")
	key := fs.String("key", "", "signing key file (NAME.key)")
	rel := fs.String("release", "", "release version, e.g. 0.6.0")
	from := fs.String("upgrades-from", "", "comma-separated releases that may upgrade to this one")
	pos, err := releaseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	if *key == "" || *rel == "" {
		return errors.New("--key and --release are required")
	}
	var upgradesFrom []string
	if *from != "" {
		upgradesFrom = strings.Split(*from, ",")
	}
	res, err := release.Sign(pos[0], *key, *rel, upgradesFrom)
	if err != nil {
		return releaseErr(err)
	}
	m := res.Manifest
	fmt.Printf("signed release %s with key %s: %d files, %d bytes; %s holds %d signature(s)\n",
		m.Release, res.KeyID, len(m.Files), m.TotalSize(), release.SignaturePath, res.Signatures)
	if res.Dropped > 0 {
		fmt.Printf("note: the manifest changed, so the %d earlier signature(s) over it were dropped; the other signers must sign again\n", res.Dropped)
	}
	return nil
}

func releaseVerify(args []string) error {
	fs := newFlagSet("release verify")
	keysDir := fs.String("keys", "", "directory of trusted release public keys (*.pub)")
	threshold := fs.Int("threshold", 1, "distinct trusted signatures needed")
	pos, err := releaseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	if *keysDir == "" {
		return errors.New("--keys KEYDIR is required")
	}
	keys, err := release.LoadKeyring(*keysDir, *threshold)
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := release.Verify(pos[0], keys)
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("FAILED: %w", releaseErr(err))}
	}
	fmt.Printf("OK release %s: %d files, %d bytes verified in %s (threshold %d of %d trusted keys)\n",
		m.Release, len(m.Files), m.TotalSize(), time.Since(start).Round(time.Millisecond), keys.Threshold(), len(keys.KeyIDs()))
	return nil
}

// openReleaseStore opens DIR/stratum.db for a command run beside (not
// inside) the founder. A running founder holds the bbolt lock; rather
// than wait for it, say at once how to do the same through the founder.
func openReleaseStore(dataDir, viaAPI string) (*store.DB, error) {
	dbPath := filepath.Join(dataDir, "stratum.db")
	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist: initialize the founder first (stratum init --data %s)", dbPath, dataDir)
		}
		return nil, err
	}
	lockErr := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if lockErr == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	f.Close()
	if errors.Is(lockErr, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("the store %s is in use by a running founder: %s through its admin API (%s), or stop the founder and run this again", dbPath, viaAPI, apiHint(viaAPI))
	}
	// The key's form (file or TPM-sealed at the default device) is the
	// data directory's business.
	return founder.DataDir(dataDir).OpenStore(founder.KeySource{})
}

func apiHint(what string) string {
	if strings.HasPrefix(what, "import") {
		return "POST /v1/admin/releases"
	}
	return "GET /v1/admin/releases"
}

func releaseImport(ctx context.Context, args []string) error {
	fs := newFlagSet("release import")
	dataDir := fs.String("data", "", "founder data directory")
	threshold := fs.Int("threshold", 1, "distinct trusted signatures needed")
	replace := fs.Bool("replace", false, "replace an imported release of the same version whose content differs")
	pos, err := releaseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("--data DIR is required")
	}
	keys, err := release.LoadKeyring(filepath.Join(*dataDir, "release-keys"), *threshold)
	if err != nil {
		return err
	}
	db, err := openReleaseStore(*dataDir, "import the release")
	if err != nil {
		return err
	}
	defer db.Close()
	progress, finish := importProgress(os.Stderr)
	start := time.Now()
	m, err := repo.Import(ctx, db, *dataDir, pos[0], keys, repo.ImportOptions{Progress: progress, Actor: "cli", Replace: *replace})
	finish()
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("not imported: %w", releaseErr(err))}
	}
	fmt.Printf("imported release %s: %d files, %d bytes into %s in %s\n", m.Release, len(m.Files), m.TotalSize(),
		filepath.Join(*dataDir, "releases", m.Release), time.Since(start).Round(time.Millisecond))
	return nil
}

// importProgress shows a progress bar on a terminal and one plain line per
// file otherwise (logs, CI), so a redirected output stays readable.
func importProgress(out *os.File) (repo.Progress, func()) {
	if term.IsTerminal(int(out.Fd())) {
		var bar *progressbar.ProgressBar
		last := ""
		return func(done, total int64, file string) {
				if bar == nil {
					bar = progressbar.NewOptions64(total,
						progressbar.OptionSetWriter(out),
						progressbar.OptionShowBytes(true),
						progressbar.OptionSetWidth(30),
						progressbar.OptionThrottle(100*time.Millisecond),
						progressbar.OptionSetDescription("importing"))
				}
				if file != last && file != "" {
					last = file
					bar.Describe(shortName(file, 40))
				}
				_ = bar.Set64(done)
			}, func() {
				if bar != nil {
					_ = bar.Exit()
					fmt.Fprintln(out)
				}
			}
	}
	last := ""
	return func(done, total int64, file string) {
		if file != last && file != "" {
			last = file
			fmt.Fprintf(out, "importing %s (%d of %d bytes done)\n", file, done, total)
		}
	}, func() {}
}

func shortName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n+3:]
}

func releaseList(args []string) error {
	fs := newFlagSet("release list")
	dataDir := fs.String("data", "", "founder data directory")
	if _, err := releaseArgs(fs, args, 0); err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("--data DIR is required")
	}
	db, err := openReleaseStore(*dataDir, "list the releases")
	if err != nil {
		return err
	}
	defer db.Close()
	list, err := repo.List(db)
	if err != nil {
		return err
	}
	return printReleases(os.Stdout, list)
}

func printReleases(w io.Writer, list []repo.Imported) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no release imported")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RELEASE\tFILES\tBYTES\tUPGRADES FROM\tIMPORTED\tMANIFEST SHA256\tSTATE")
	for _, r := range list {
		state := "ok"
		if len(r.Corrupt) > 0 {
			state = fmt.Sprintf("CORRUPT (%s): re-import", strings.Join(r.Corrupt, ", "))
		}
		from := strings.Join(r.UpgradesFrom, ",")
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Release, r.Files, r.Bytes, from,
			r.ImportedAt.Format(time.RFC3339), r.ManifestSHA256[:min(16, len(r.ManifestSHA256))], state)
	}
	return tw.Flush()
}

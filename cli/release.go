package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/founder"
	"stratum/joiner"
	"stratum/release"
	"stratum/release/repo"
	"stratum/store"
	"stratum/wire"
)

func init() { Register(newReleaseCmd) }

func newReleaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "release tooling: keygen, sign, verify; import, push, list, get, keys, trust-key on the founder",
		Long: `Release tooling. keygen, sign and verify work on local files. import, push,
list, get, keys and trust-key talk to the founder's admin API (--api);
import, list, keys and trust-key take --data DIR instead to work on a
stopped founder's data directory.`,
	}
	cmd.AddCommand(newReleaseKeygenCmd(), newReleaseSignCmd(), newReleaseVerifyCmd(),
		newReleaseImportCmd(), newReleasePushCmd(), newReleaseListCmd(), newReleaseGetCmd(),
		newReleaseKeysCmd(), newReleaseTrustKeyCmd())
	return cmd
}

// releaseErr turns a domain error into the sentence a person acts on.
func releaseErr(err error) error {
	if e, ok := apierr.As(err); ok {
		return errors.New(e.Message)
	}
	return err
}

func newReleaseKeygenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keygen --out NAME", Short: "write a release signing key pair: NAME.key (0600) and NAME.pub", Args: cobra.NoArgs}
	out := cmd.Flags().String("out", "", "key pair name: writes NAME.key and NAME.pub")
	_ = cmd.MarkFlagRequired("out")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		id, err := release.Keygen(*out)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s.key (secret, mode 0600) and %s.pub\nkeyId %s\n", *out, *out, id)
		return nil
	}
	return cmd
}

func newReleaseSignCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sign --key NAME.key --release V [--upgrades-from V1,V2] DIR",
		Short: "write DIR/payload/manifest.json and add a signature",
		Args:  cobra.ExactArgs(1),
	}
	key := cmd.Flags().String("key", "", "signing key file (NAME.key)")
	rel := cmd.Flags().String("release", "", "release version, e.g. 0.6.0")
	from := cmd.Flags().String("upgrades-from", "", "comma-separated releases that may upgrade to this one")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagRequired("release")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var upgradesFrom []string
		if *from != "" {
			upgradesFrom = strings.Split(*from, ",")
		}
		res, err := release.Sign(args[0], *key, *rel, upgradesFrom)
		if err != nil {
			return releaseErr(err)
		}
		m := res.Manifest
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "signed release %s with key %s: %d files, %s; %s holds %d signature(s)\n",
			m.Release, res.KeyID, len(m.Files), joiner.HumanBytes(m.TotalSize()), release.SignaturePath, res.Signatures)
		if res.Dropped > 0 {
			fmt.Fprintf(out, "note: the manifest changed, so the %d earlier signature(s) over it were dropped; the other signers must sign again\n", res.Dropped)
		}
		return nil
	}
	return cmd
}

func newReleaseVerifyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "verify --keys KEYDIR [--threshold N] DIR", Short: "check the signature and every file of a release tree", Args: cobra.ExactArgs(1)}
	keysDir := cmd.Flags().String("keys", "", "directory of trusted release public keys (*.pub)")
	threshold := cmd.Flags().Int("threshold", 1, "distinct trusted signatures needed")
	_ = cmd.MarkFlagRequired("keys")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		keys, err := release.LoadKeyring(*keysDir, *threshold)
		if err != nil {
			return err
		}
		start := time.Now()
		m, err := release.Verify(args[0], keys)
		if err != nil {
			return &ExitError{Code: ExitTrust, Err: fmt.Errorf("FAILED: %w", releaseErr(err))}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "OK release %s: %d files, %d bytes verified in %s (threshold %d of %d trusted keys)\n",
			m.Release, len(m.Files), m.TotalSize(), time.Since(start).Round(time.Millisecond), keys.Threshold(), len(keys.KeyIDs()))
		return nil
	}
	return cmd
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

// stoppedRepo opens the release repository of a stopped founder's data
// directory (openReleaseStore); closeStore closes its store.
func stoppedRepo(dataDir, what string, threshold int) (r *repo.Service, closeStore func() error, err error) {
	db, err := openReleaseStore(dataDir, what)
	if err != nil {
		return nil, nil, err
	}
	if r, err = repo.New(repo.Config{DB: db, DataDir: dataDir, Threshold: threshold, CacheBytes: -1}); err != nil {
		db.Close()
		return nil, nil, err
	}
	return r, db.Close, nil
}

// stoppedOrAPI is a release command's answer, kept as it came for -o:
// with dataDir, what local returns on the stopped founder's repository
// (stoppedRepo; what says what the command does), marshalled as the API
// answers; else the admin API's answer to method path with body.
func stoppedOrAPI(cmd *cobra.Command, admin *adminFlags, dataDir, what, method, path string, body any, local func(*repo.Service) (any, error)) (json.RawMessage, error) {
	if dataDir == "" {
		c, err := admin.client()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		err = c.do(cmd.Context(), method, path, body, &raw)
		return raw, err
	}
	r, closeStore, err := stoppedRepo(dataDir, what, 0)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	v, err := local(r)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func apiHint(what string) string {
	switch {
	case strings.HasPrefix(what, "import"):
		return "stratum release import PATH --api URL, or stratum release push DIR"
	case strings.HasPrefix(what, "trust"):
		return "stratum release trust-key FILE.pub --api URL"
	case strings.HasSuffix(what, "keys"):
		return "stratum release keys --api URL"
	}
	return "stratum release list --api URL"
}

// importAnswer is POST /v1/admin/releases' (and .../upload's) answer.
type importAnswer struct {
	Release      string   `json:"release"`
	Files        int      `json:"files"`
	UpgradesFrom []string `json:"upgradesFrom"`
}

func newReleaseImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import PATH",
		Short: "import a signed release tree that is on the founder (through its API, or --data on a stopped founder)",
		Long: `Import a signed release tree found at PATH on the founder's machine. By
default the running founder imports it through its admin API (--api) and
verifies it against its trusted keys in DATA/release-keys (stratum release
keys; a key file counts once trusted: stratum release trust-key); with
--data DIR the command
opens a stopped founder's store itself. A tree on your own machine is
uploaded with stratum release push DIR.`,
		Args: cobra.ExactArgs(1),
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	dataDir := cmd.Flags().String("data", "", "a stopped founder's data directory (--api is then not used)")
	threshold := cmd.Flags().Int("threshold", 1, "distinct trusted signatures needed (with --data; the founder applies its own)")
	replace := cmd.Flags().Bool("replace", false, "replace an imported release of the same version whose content differs")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *dataDir != "" {
			return importStopped(cmd, *dataDir, args[0], *threshold, *replace)
		}
		c, err := admin.client()
		if err != nil {
			return err
		}
		path, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := c.do(cmd.Context(), "POST", "/v1/admin/releases", map[string]any{"path": path, "replace": *replace}, &raw); err != nil {
			return err
		}
		var ans importAnswer
		return o.render(cmd.OutOrStdout(), raw, &ans, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "imported release %s: %d files\n", ans.Release, ans.Files)
			return err
		})
	}
	return cmd
}

func importStopped(cmd *cobra.Command, dataDir, src string, threshold int, replace bool) error {
	r, closeStore, err := stoppedRepo(dataDir, "import the release", threshold)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := r.AdoptKeys(); err != nil {
		return err
	}
	progress, finish := importProgress(os.Stderr, "importing")
	start := time.Now()
	m, err := r.Import(cmd.Context(), src, repo.ImportOptions{Progress: progress, Actor: "cli", Replace: replace})
	finish()
	if err != nil {
		return fmt.Errorf("not imported: %w", releaseErr(err))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "imported release %s: %d files, %d bytes into %s in %s\n", m.Release, len(m.Files), m.TotalSize(),
		filepath.Join(dataDir, "releases", m.Release), time.Since(start).Round(time.Millisecond))
	return nil
}

// importProgress shows a progress bar on a terminal and one plain line per
// file otherwise (logs, CI), so a redirected output stays readable.
func importProgress(out *os.File, verb string) (repo.Progress, func()) {
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
						progressbar.OptionSetDescription(verb))
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
			fmt.Fprintf(out, "%s %s (%d of %d bytes done)\n", verb, file, done, total)
		}
	}, func() {}
}

func shortName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n+3:]
}

func newReleaseListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list the imported releases (through the API, or --data on a stopped founder)",
		Args:  cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	dataDir := cmd.Flags().String("data", "", "a stopped founder's data directory (--api is then not used)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var list struct {
			Releases []wire.ImportedRelease `json:"releases"`
		}
		raw, err := stoppedOrAPI(cmd, admin, *dataDir, "list the releases", "GET", "/v1/admin/releases", nil, func(r *repo.Service) (any, error) {
			var err error
			list.Releases, err = r.ListStopped()
			return list, err
		})
		if err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), raw, &list, func() error { return printReleases(cmd.OutOrStdout(), list.Releases) })
	}
	return cmd
}

func newReleaseGetCmd() *cobra.Command {
	var r wire.ImportedRelease
	return showCommand("get RELEASE", "show one imported release", cobra.ExactArgs(1), func(args []string) string {
		return "/v1/admin/releases/" + url.PathEscape(args[0])
	}, &r, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "release:\t%s\nfiles:\t%d\nsize:\t%s (%d bytes)\nupgrades from:\t%s\nimported:\t%s\nmanifest sha256:\t%s\nsigners:\t%s\n",
			r.Release, r.Files, joiner.HumanBytes(r.Bytes), r.Bytes, strings.Join(r.UpgradesFrom, ","), r.ImportedAt.Format(time.RFC3339), r.ManifestSHA256, strings.Join(r.SignerKeyIDs, ","))
		fmt.Fprintf(tw, "status:\t%s\n", cmp.Or(r.Status, "verified"))
		if len(r.Missing) > 0 {
			fmt.Fprintf(tw, "MISSING:\t%s\n", strings.Join(r.Missing, ", "))
		}
		if len(r.Corrupt) > 0 {
			fmt.Fprintf(tw, "CORRUPT:\t%s\n", strings.Join(r.Corrupt, ", "))
		}
		if r.Fix != "" {
			fmt.Fprintf(tw, "fix:\t%s\n", r.Fix)
		}
		return tw.Flush()
	})
}

func printReleases(w io.Writer, list []wire.ImportedRelease) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no release imported")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RELEASE\tFILES\tSIZE\tUPGRADES FROM\tIMPORTED\tMANIFEST SHA256\tSTATE")
	for _, r := range list {
		state := cmp.Or(r.Status, "verified")
		switch {
		case len(r.Missing) > 0:
			state = fmt.Sprintf("MISSING (%s): %s", plural(len(r.Missing), "file", "files"), r.Fix)
		case len(r.Corrupt) > 0:
			state = fmt.Sprintf("CORRUPT (%s): %s", strings.Join(r.Corrupt, ", "), r.Fix)
		}
		from := strings.Join(r.UpgradesFrom, ",")
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Release, r.Files, joiner.HumanBytes(r.Bytes), from,
			r.ImportedAt.Format(time.RFC3339), r.ManifestSHA256[:min(16, len(r.ManifestSHA256))], state)
	}
	return tw.Flush()
}

func newReleaseKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "list the founder's release key files and whether each is trusted (through the API, or --data on a stopped founder)",
		Long: `List the *.pub files of the founder's DATA/release-keys, each with its key
id and whether it is trusted: a release it signs is imported only once
it is (SPEC 16.2; stratum release trust-key). By default through the
running founder's admin API (--api); with --data DIR on a stopped
founder's data directory, whose key files are first adopted if this
build never started there (as its next start would).`,
		Args: cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	dataDir := cmd.Flags().String("data", "", "a stopped founder's data directory (--api is then not used)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var list wire.ReleaseKeys
		raw, err := stoppedOrAPI(cmd, admin, *dataDir, "list the release keys", "GET", "/v1/admin/release-keys", nil, func(r *repo.Service) (any, error) {
			// A data directory this build never started in is adopted
			// first, as its next start would.
			if err := r.AdoptKeys(); err != nil {
				return nil, err
			}
			keys, err := r.ListKeys()
			return wire.ReleaseKeys{Keys: keys}, releaseErr(err)
		})
		if err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), raw, &list, func() error { return printReleaseKeys(cmd.OutOrStdout(), list.Keys) })
	}
	return cmd
}

func printReleaseKeys(w io.Writer, keys []wire.ReleaseKey) error {
	if len(keys) == 0 {
		_, err := fmt.Fprintln(w, "no release key file")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tKEY ID\tTRUSTED")
	for _, k := range keys {
		trusted := "yes"
		switch {
		case k.Problem != "":
			trusted = "NO: " + k.Problem
		case !k.Trusted:
			trusted = "NO: stratum release trust-key to trust it"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.File, cmp.Or(k.KeyID, "-"), trusted)
	}
	return tw.Flush()
}

// maxPublicKeyFile bounds the public key file trust-key reads.
const maxPublicKeyFile = 16 << 10

func newReleaseTrustKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust-key FILE.pub [--name NAME.pub]",
		Short: "trust a release public key: the founder keeps it in DATA/release-keys and imports releases it signs",
		Long: `Trust a release public key (as written by stratum release keygen). The
founder writes it to DATA/release-keys/NAME.pub (NAME.pub: FILE's own name
unless --name) and records it: a key file put there by other means is not
trusted (SPEC 16.2). By default through the running founder's admin API
(--api); with --data DIR on a stopped founder's data directory. Each
replica of an HA founder needs the file: run it on each.`,
		Args: cobra.ExactArgs(1),
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	dataDir := cmd.Flags().String("data", "", "a stopped founder's data directory (--api is then not used)")
	name := cmd.Flags().String("name", "", "the key file's name in DATA/release-keys (default: FILE's name)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		pem, err := crypto.ReadFileLimit(args[0], maxPublicKeyFile)
		if err != nil {
			return err
		}
		// Checked here, before a byte leaves: given the NAME.key beside
		// NAME.pub by mistake, the signing key would travel to the
		// founder only to be refused there.
		if _, err := release.ParsePublicKey(pem); err != nil {
			return fmt.Errorf("%s is not a release public key (NAME.pub, as stratum release keygen writes it; nothing was sent): %w", args[0], err)
		}
		req := wire.TrustReleaseKey{Name: cmp.Or(*name, filepath.Base(args[0])), PublicKey: string(pem)}
		raw, err := stoppedOrAPI(cmd, admin, *dataDir, "trust the key", "POST", "/v1/admin/release-keys", req, func(r *repo.Service) (any, error) {
			k, err := r.TrustKey(req.Name, []byte(req.PublicKey), "cli")
			return k, releaseErr(err)
		})
		if err != nil {
			return err
		}
		var k wire.ReleaseKey
		return o.render(cmd.OutOrStdout(), raw, &k, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "trusted release key %s as %s\n", k.KeyID, k.File)
			return err
		})
	}
	return cmd
}

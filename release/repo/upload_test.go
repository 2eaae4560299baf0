package repo

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/release"
	"stratum/release/releasetest"
	"stratum/store/storetest"
)

// tarOf writes a tar stream of the given entries, in order.
type tarEntry struct {
	name string
	typ  byte
	body []byte
	link string
}

func tarOf(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link, Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImportTar: a tree sent by release.WriteTar is imported whole, and
// the staging directory is gone afterwards.
func TestImportTar(t *testing.T) {
	src, blob, pub := releasetest.SignedTree(t, 3*ChunkSize+5, "0.7.0")
	keys := releasetest.Keyring(t, 1, pub)
	db, dataDir := storetest.Temp(t)
	var stream bytes.Buffer
	var sent int64
	if _, err := release.WriteTar(&stream, src, func(n int64) { sent += n }); err != nil {
		t.Fatal(err)
	}
	m, err := importTar(context.Background(), db, dataDir, &stream, keys, DefaultUploadLimits, ImportOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Release != "0.7.0" || sent != m.TotalSize() {
		t.Fatalf("imported %s, %d bytes sent of %d", m.Release, sent, m.TotalSize())
	}
	want, _ := os.ReadFile(filepath.Join(src, blob))
	got, err := os.ReadFile(filepath.Join(dataDir, "releases", "0.7.0", blob))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("imported blob differs: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "uploads")); !os.IsNotExist(err) {
		t.Fatalf("the staging directory stayed: %v", err)
	}
}

// TestImportTarRefusals: each bad upload is refused with the right code
// and leaves nothing behind: no release, no record, no staged file.
func TestImportTarRefusals(t *testing.T) {
	src, blob, pub := releasetest.SignedTree(t, ChunkSize+5, "0.7.0")
	keys := releasetest.Keyring(t, 1, pub)
	mb, _ := os.ReadFile(filepath.Join(src, release.ManifestPath))
	sb, _ := os.ReadFile(filepath.Join(src, release.SignaturePath))
	blobBytes, _ := os.ReadFile(filepath.Join(src, blob))
	_, _, otherPub := releasetest.SignedTree(t, 10, "0.7.0")
	otherKeys := releasetest.Keyring(t, 1, otherPub)
	head := []tarEntry{{name: release.ManifestPath, body: mb}, {name: release.SignaturePath, body: sb}}
	with := func(more ...tarEntry) []byte { return tarOf(t, append(append([]tarEntry{}, head...), more...)...) }
	var good bytes.Buffer
	if _, err := release.WriteTar(&good, src, nil); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(blobBytes)
	flipped[7] ^= 1

	for _, tc := range []struct {
		name   string
		stream []byte
		keys   *release.Keyring
		limits UploadLimits
		code   apierr.Code
		says   string
	}{
		{"not tar", []byte("hello, this is not a tar stream at all, but it is long enough........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................"), keys, DefaultUploadLimits, apierr.InvalidInput, "tar"},
		{"empty", nil, keys, DefaultUploadLimits, apierr.InvalidInput, "no file"},
		{"file before the manifest", tarOf(t, tarEntry{name: blob, body: blobBytes}), keys, DefaultUploadLimits, apierr.InvalidInput, "comes before"},
		{"untrusted signer", good.Bytes(), otherKeys, DefaultUploadLimits, "", "signature"},
		{"unlisted file", with(tarEntry{name: "os/extra", body: []byte("x")}), keys, DefaultUploadLimits, apierr.InvalidInput, "not listed"},
		{"listed file, other size", with(tarEntry{name: blob, body: blobBytes[:10]}), keys, DefaultUploadLimits, apierr.InvalidInput, "the manifest lists"},
		{"listed file, other bytes", with(tarEntry{name: blob, body: flipped}), keys, DefaultUploadLimits, "", blob},
		{"missing file", with(), keys, DefaultUploadLimits, "", ""},
		{"dot-dot", with(tarEntry{name: "../escape", body: []byte("x")}), keys, DefaultUploadLimits, apierr.InvalidInput, "leaves"},
		{"absolute", with(tarEntry{name: "/etc/passwd", body: []byte("x")}), keys, DefaultUploadLimits, apierr.InvalidInput, "leaves"},
		{"symlink", with(tarEntry{name: "os/link", typ: tar.TypeSymlink, link: "/etc/passwd"}), keys, DefaultUploadLimits, apierr.InvalidInput, "links"},
		{"hard link", with(tarEntry{name: "os/hard", typ: tar.TypeLink, link: release.ManifestPath}), keys, DefaultUploadLimits, apierr.InvalidInput, "links"},
		{"twice", with(tarEntry{name: release.ManifestPath, body: mb}), keys, DefaultUploadLimits, apierr.InvalidInput, "twice"},
		{"over the byte limit", good.Bytes(), keys, UploadLimits{MaxBytes: int64(good.Len() / 2), MaxFiles: 100}, apierr.PayloadTooLarge, "limit"},
		{"over the entry limit", good.Bytes(), keys, UploadLimits{MaxBytes: 1 << 40, MaxFiles: 3}, apierr.PayloadTooLarge, "entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, dataDir := storetest.Temp(t)
			_, err := importTar(context.Background(), db, dataDir, bytes.NewReader(tc.stream), tc.keys, tc.limits, ImportOptions{Actor: "test"})
			if err == nil {
				t.Fatal("imported")
			}
			if tc.code != "" && apierr.CodeOf(err) != tc.code {
				t.Fatalf("code %s, want %s: %v", apierr.CodeOf(err), tc.code, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
			if left := releasesLeft(t, dataDir); len(left) != 0 {
				t.Fatalf("left behind in releases/: %v", left)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "uploads")); !os.IsNotExist(err) {
				t.Fatalf("the staging directory stayed: %v", err)
			}
			if list, err := listReleases(db, nil); err != nil || len(list) != 0 {
				t.Fatalf("catalog after a refused upload: %v %v", list, err)
			}
		})
	}
}

// TestEntryName: the tar entry parser's verdict on names and types.
func TestEntryName(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  byte
		want string
		ok   bool
	}{
		{"payload/manifest.json", tar.TypeReg, "payload/manifest.json", true},
		{"./os/index.json", tar.TypeReg, "os/index.json", true},
		{"os/", tar.TypeDir, "os", true},
		{"./", tar.TypeDir, "", true},
		{".", tar.TypeReg, "", false},
		{"../x", tar.TypeReg, "", false},
		{"os/../../x", tar.TypeReg, "", false},
		{"os//x", tar.TypeReg, "", false},
		{"/abs", tar.TypeReg, "", false},
		{"a\x00b", tar.TypeReg, "", false},
		{"a\\..\\b", tar.TypeReg, "", false},
		{"\xff", tar.TypeReg, "", false},
		{strings.Repeat("a", maxEntryName+1), tar.TypeReg, "", false},
		{"link", tar.TypeSymlink, "", false},
		{"dev", tar.TypeChar, "", false},
		{"fifo", tar.TypeFifo, "", false},
	} {
		got, err := EntryName(&tar.Header{Name: tc.name, Typeflag: tc.typ})
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("EntryName(%q, %c) = %q, %v; want %q ok=%v", tc.name, tc.typ, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzReadTarEntries: whatever the stream, every name handed on is a
// local path, the byte bound holds, and writing the entries under an
// os.Root never fails by leaving it.
func FuzzReadTarEntries(f *testing.F) {
	f.Add(tarOf(f, tarEntry{name: "payload/manifest.json", body: []byte("{}")}, tarEntry{name: "os/", typ: tar.TypeDir}))
	f.Add(tarOf(f, tarEntry{name: "../x", body: []byte("x")}))
	f.Add(tarOf(f, tarEntry{name: "l", typ: tar.TypeSymlink, link: "/"}))
	f.Add([]byte("not a tar"))
	limits := UploadLimits{MaxBytes: 1 << 16, MaxFiles: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		var bytesSeen int64
		_ = ReadTarEntries(bytes.NewReader(b), limits, func(name string, h *tar.Header, body io.Reader) error {
			if !filepath.IsLocal(name) {
				t.Fatalf("non-local name %q handed on", name)
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
				t.Fatalf("type %c handed on", h.Typeflag)
			}
			if h.Typeflag == tar.TypeDir {
				return mkdirAll(root, name)
			}
			n, _ := io.Copy(io.Discard, body)
			bytesSeen += n
			return nil
		})
		if bytesSeen > limits.MaxBytes {
			t.Fatalf("%d bytes read past the %d byte limit", bytesSeen, limits.MaxBytes)
		}
	})
}

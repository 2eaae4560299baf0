package backup

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"stratum/crypto"
)

// store stands in for the bbolt file: big enough for several age chunks.
func storeBytes() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 300<<10)
	for i := range b {
		b[i] = byte(r.IntN(16)) // compressible, not trivially
	}
	return b
}

func snapshotOf(data []byte) Snapshot {
	return func(w io.Writer) (int64, error) {
		zw, err := zstd.NewWriter(w)
		if err != nil {
			return 0, err
		}
		n, err := zw.Write(data)
		if err != nil {
			return int64(n), err
		}
		return int64(n), zw.Close()
	}
}

// restore reads a snapshot file as the founder's restore does: open, let
// zstd consume the snapshot, then Finish.
func restore(file []byte, ids []age.Identity) ([]byte, *Contents, error) {
	c, err := Open(bytes.NewReader(file), ids)
	if err != nil {
		return nil, nil, err
	}
	zr, err := zstd.NewReader(c)
	if err != nil {
		return nil, nil, err
	}
	defer zr.Close()
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, nil, err
	}
	return out, c, c.Finish()
}

func newIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func write(t testing.TB, o Options, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(&buf, o, snapshotOf(data)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := storeBytes()
	alice, bob := newIdentity(t), newIdentity(t)
	dk, err := crypto.GenerateDataKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opts      Options
		ids       []age.Identity
		encrypted bool
		withKey   bool
	}{
		{"plain", Options{}, nil, false, false},
		{"one recipient", Options{Recipients: []age.Recipient{alice.Recipient()}}, []age.Identity{alice}, true, false},
		{"second of two recipients", Options{Recipients: []age.Recipient{alice.Recipient(), bob.Recipient()}}, []age.Identity{bob}, true, false},
		{"with the data key", Options{Recipients: []age.Recipient{alice.Recipient()}, DataKey: dk}, []age.Identity{alice}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := write(t, tt.opts, data)
			if tt.encrypted && bytes.Contains(file, []byte(magicLine)) {
				t.Fatal("the encrypted file shows its header in clear")
			}
			got, c, err := restore(file, tt.ids)
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("the restored snapshot differs")
			}
			if c.Encrypted != tt.encrypted {
				t.Errorf("Encrypted = %v", c.Encrypted)
			}
			if tt.withKey != (c.DataKey != nil) || (tt.withKey && !c.DataKey.Equal(dk)) {
				t.Errorf("data key = %v, want included=%v and equal", c.DataKey, tt.withKey)
			}
		})
	}
}

func TestDataKeyNeedsRecipients(t *testing.T) {
	dk, _ := crypto.GenerateDataKey()
	var buf bytes.Buffer
	called := false
	_, err := Write(&buf, Options{DataKey: dk}, func(io.Writer) (int64, error) { called = true; return 0, nil })
	if !errors.Is(err, ErrDataKeyNeedsRecipients) || called || buf.Len() != 0 {
		t.Fatalf("Write with a data key and no recipients = %v (snapshot taken: %v, %d bytes)", err, called, buf.Len())
	}
}

// Every way a restore can be handed the wrong thing fails with its own
// error, and none of those errors shows the data key.
func TestOpenRejects(t *testing.T) {
	data := storeBytes()
	alice, mallory := newIdentity(t), newIdentity(t)
	dk, _ := crypto.GenerateDataKey()
	enc := write(t, Options{Recipients: []age.Recipient{alice.Recipient()}, DataKey: dk}, data)
	plain := write(t, Options{}, data)
	flip := func(b []byte, at int) []byte {
		out := append([]byte(nil), b...)
		out[at] ^= 0x01
		return out
	}
	hdrEnd := bytes.Index(enc, []byte("\n---")) // end of the age header
	// An age file to the right identity whose plaintext is not a snapshot.
	var foreign bytes.Buffer
	aw, _ := age.Encrypt(&foreign, alice.Recipient())
	aw.Write([]byte("just some file\n\n"))
	aw.Close()
	var unknownLine bytes.Buffer
	aw, _ = age.Encrypt(&unknownLine, alice.Recipient())
	aw.Write([]byte(magicLine + "\nsomething else\n\n"))
	aw.Close()

	tests := []struct {
		name string
		file []byte
		ids  []age.Identity
		want error
	}{
		{"encrypted, no identity", enc, nil, ErrNeedIdentity},
		{"encrypted, wrong identity", enc, []age.Identity{mallory}, ErrWrongIdentity},
		{"plain, with an identity", plain, []age.Identity{alice}, ErrNotEncrypted},
		{"empty file", nil, nil, ErrNotBackup},
		{"junk", []byte("hello, this is not a backup"), nil, ErrNotBackup},
		{"header tampered", flip(enc, hdrEnd-3), []age.Identity{alice}, nil}, // wrong identity or damaged
		{"payload byte flipped early", flip(enc, hdrEnd+200), []age.Identity{alice}, ErrDamaged},
		{"payload byte flipped in the middle", flip(enc, len(enc)/2), []age.Identity{alice}, ErrDamaged},
		{"last byte flipped", flip(enc, len(enc)-1), []age.Identity{alice}, ErrDamaged},
		{"truncated in the header", enc[:hdrEnd/2], []age.Identity{alice}, ErrDamaged},
		{"truncated to half", enc[:len(enc)/2], []age.Identity{alice}, ErrDamaged},
		{"truncated at a chunk boundary", enc[:hdrEnd+4+16+64<<10+16+1+16], []age.Identity{alice}, ErrDamaged},
		{"last byte cut", enc[:len(enc)-1], []age.Identity{alice}, ErrDamaged},
		{"data appended", append(append([]byte(nil), enc...), "more"...), []age.Identity{alice}, ErrDamaged},
		{"decrypts to something else", foreign.Bytes(), []age.Identity{alice}, ErrDamaged},
		{"unknown header line", unknownLine.Bytes(), []age.Identity{alice}, ErrDamaged},
	}
	raw := dk.Bytes()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := restore(tt.file, tt.ids)
			if err == nil {
				t.Fatalf("restore succeeded (%d bytes)", len(got))
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("restore error = %v, want %v", err, tt.want)
			}
			if tt.want == nil && !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrWrongIdentity) {
				t.Fatalf("restore error = %v, want damaged or wrong identity", err)
			}
			if bytes.Contains([]byte(err.Error()), raw) || strings.Contains(err.Error(), string(raw)) {
				t.Fatal("the error carries the data key")
			}
			t.Log(err)
		})
	}
}

func TestRecipientsAndIdentities(t *testing.T) {
	dir := t.TempDir()
	alice := newIdentity(t)
	writeFile := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recips := writeFile("recipients.txt", "# operators\n\n"+alice.Recipient().String()+"\n")
	lines, err := ReadRecipientsFile(recips)
	if err != nil || len(lines) != 1 {
		t.Fatalf("ReadRecipientsFile = %v, %v", lines, err)
	}
	if _, err := ReadRecipientsFile(writeFile("empty.txt", "# none\n")); err == nil {
		t.Error("a recipients file without recipients was accepted")
	}
	// A secret key handed as a recipient must not be echoed.
	secret := alice.String()
	for _, bad := range [][]string{{"age1notakey"}, {secret}, {"ssh-ed25519 AAAA"}} {
		_, err := ParseRecipients(bad)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("ParseRecipients(%.12q...) = %v", bad[0], err)
		}
	}
	if _, err := LoadIdentities([]string{writeFile("id.txt", "# created: now\n"+secret+"\n")}); err != nil {
		t.Fatalf("LoadIdentities: %v", err)
	}
	mangled := secret[:len(secret)-3] + "QQQ"
	for name, content := range map[string]string{
		"mangled key":    mangled + "\n",
		"a public key":   alice.Recipient().String() + "\n",
		"no identities":  "# nothing\n",
		"binary garbage": "\x00\xff\xfe",
	} {
		_, err := LoadIdentities([]string{writeFile(name, content)})
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), mangled[16:]) || strings.Contains(err.Error(), secret[16:]) {
			t.Errorf("%s: the error shows key material: %v", name, err)
		}
	}
	if _, err := LoadIdentities([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing identity file was accepted")
	}
}

// FuzzOpen: any file, encrypted to the fuzzer's identity or not, is
// either refused or read to the end without a panic.
func FuzzOpen(f *testing.F) {
	id, err := age.ParseX25519Identity("AGE-SECRET-KEY-1GQ9778VQXMMJVE8SK7J6VT8UJ4HDQAJUVSFCWCM02D8GEWQ72PVQ2Y5J33")
	if err != nil {
		f.Fatal(err)
	}
	dk, _ := crypto.GenerateDataKey()
	small := []byte("a tiny store")
	f.Add(write(f, Options{}, small))
	f.Add(write(f, Options{Recipients: []age.Recipient{id.Recipient()}}, small))
	f.Add(write(f, Options{Recipients: []age.Recipient{id.Recipient()}, DataKey: dk}, small))
	f.Add([]byte("age-encryption.org/v1\n-> X25519 abc\n--- def\n"))
	f.Fuzz(func(t *testing.T, file []byte) {
		for _, ids := range [][]age.Identity{nil, {id}} {
			_, _, _ = restore(file, ids)
		}
	})
}

// FuzzReadHeader aims at the plaintext header parser directly, which
// FuzzOpen reaches only through age's authentication.
func FuzzReadHeader(f *testing.F) {
	dk, _ := crypto.GenerateDataKey()
	f.Add(header(dk))
	f.Add(header(nil))
	f.Add([]byte(magicLine + "\ndata-key AAAA\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := readHeader(bufio.NewReader(bytes.NewReader(data)))
		if err == nil && k != nil && !bytes.Contains(data, []byte(dataKeyWord)) {
			t.Fatal("a data key from a header without a data-key line")
		}
	})
}

// BenchmarkWrite measures what encryption adds to a snapshot: the same
// 64 MiB of already-compressed bytes written plain and through age.
func BenchmarkWrite(b *testing.B) {
	data := make([]byte, 64<<20)
	r := rand.NewChaCha8([32]byte{3, 4})
	r.Read(data)
	snap := func(w io.Writer) (int64, error) { n, err := w.Write(data); return int64(n), err }
	id := newIdentity(b)
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"plain", Options{}},
		{"age", Options{Recipients: []age.Recipient{id.Recipient()}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Write(io.Discard, bc.opts, snap); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

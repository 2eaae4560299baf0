package backup

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
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

// entries is a body: the store first, then other files.
type entries []struct {
	name string
	data []byte
}

func body(store []byte, more ...string) entries {
	e := entries{{StoreEntry, store}}
	for i := 0; i+1 < len(more); i += 2 {
		e = append(e, struct {
			name string
			data []byte
		}{more[i], []byte(more[i+1])})
	}
	return e
}

func (e entries) meta() Meta {
	m := Meta{ClusterID: "c-test", CAPin: "sha256:00", StoreBytes: int64(len(e[0].data)), Files: len(e)}
	for _, x := range e {
		m.Bytes += int64(len(x.data))
	}
	return m
}

func (e entries) write(a *Archive) error {
	for _, x := range e {
		if err := a.Add(x.name, int64(len(x.data)), func(w io.Writer) error { _, err := w.Write(x.data); return err }); err != nil {
			return err
		}
	}
	return nil
}

// restore reads a backup file as the founder's restore does: open,
// authenticate with key, read every entry, then Finish.
func restore(file []byte, ids []age.Identity, key *crypto.DataKey) (entries, *Contents, error) {
	c, err := Open(bytes.NewReader(file), ids)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	if err := c.Authenticate(key); err != nil {
		return nil, c, err
	}
	var out entries
	for {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, c, err
		}
		b, err := io.ReadAll(e)
		if err != nil {
			return nil, c, err
		}
		out = append(out, struct {
			name string
			data []byte
		}{e.Name, b})
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

func write(t testing.TB, o Options, e entries) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(&buf, o, e.meta(), e.write); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func equal(a, b entries) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].data, b[i].data) {
			return false
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	data := body(storeBytes(), "ca.pem", "-----BEGIN CERTIFICATE-----\n", "releases/0.2.0/payload/manifest.json", "{}")
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
		{"plain", Options{MACKey: dk}, nil, false, false},
		{"one recipient", Options{Recipients: []age.Recipient{alice.Recipient()}, MACKey: dk}, []age.Identity{alice}, true, false},
		{"second of two recipients", Options{Recipients: []age.Recipient{alice.Recipient(), bob.Recipient()}, MACKey: dk}, []age.Identity{bob}, true, false},
		{"with the data key", Options{Recipients: []age.Recipient{alice.Recipient()}, DataKey: dk, MACKey: dk}, []age.Identity{alice}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := write(t, tt.opts, data)
			if tt.encrypted && bytes.Contains(file, []byte(magicLine)) {
				t.Fatal("the encrypted file shows its header in clear")
			}
			got, c, err := restore(file, tt.ids, dk)
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if !equal(got, data) {
				t.Fatal("the restored entries differ")
			}
			if c.Encrypted != tt.encrypted || c.Meta != data.meta() {
				t.Errorf("Encrypted = %v, Meta = %+v", c.Encrypted, c.Meta)
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
	_, err := Write(&buf, Options{DataKey: dk, MACKey: dk}, Meta{}, func(*Archive) error { called = true; return nil })
	if !errors.Is(err, ErrDataKeyNeedsRecipients) || called || buf.Len() != 0 {
		t.Fatalf("Write with a data key and no recipients = %v (body written: %v, %d bytes)", err, called, buf.Len())
	}
}

// A body that does not match its header is refused while writing.
func TestWriteKeepsToItsHeader(t *testing.T) {
	dk, _ := crypto.GenerateDataKey()
	data := body([]byte("store"), "ca.pem", "x")
	for name, m := range map[string]Meta{
		"fewer files announced": {StoreBytes: 5, Bytes: 6, Files: 1},
		"fewer bytes announced": {StoreBytes: 5, Bytes: 5, Files: 2},
		"more bytes announced":  {StoreBytes: 5, Bytes: 9, Files: 2},
	} {
		if _, err := Write(io.Discard, Options{MACKey: dk}, m, data.write); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

// Every way a restore can be handed the wrong thing fails with its own
// error, and none of those errors shows the data key.
func TestOpenRejects(t *testing.T) {
	data := body(storeBytes(), "ca.pem", "pem")
	alice, mallory := newIdentity(t), newIdentity(t)
	dk, _ := crypto.GenerateDataKey()
	forger, _ := crypto.GenerateDataKey()
	enc := write(t, Options{Recipients: []age.Recipient{alice.Recipient()}, DataKey: dk, MACKey: dk}, data)
	plain := write(t, Options{MACKey: dk}, data)
	forged := write(t, Options{Recipients: []age.Recipient{alice.Recipient()}, MACKey: forger}, data)
	flip := func(b []byte, at int) []byte {
		out := append([]byte(nil), b...)
		out[at] ^= 0x01
		return out
	}
	hdrEnd := bytes.Index(enc, []byte("\n---")) // end of the age header
	plainHdrEnd := bytes.Index(plain, []byte("\n\n")) + 2
	// An age file to the right identity whose plaintext is not a backup.
	var foreign bytes.Buffer
	aw, _ := age.Encrypt(&foreign, alice.Recipient())
	aw.Write([]byte("just some file\n\n"))
	aw.Close()
	var unknownLine bytes.Buffer
	aw, _ = age.Encrypt(&unknownLine, alice.Recipient())
	aw.Write([]byte(magicLine + "\nsomething else\n\n"))
	aw.Close()
	var zw bytes.Buffer
	z, _ := zstd.NewWriter(&zw)
	z.Write([]byte("a first-build snapshot"))
	z.Close()
	// A header edited to announce a bigger store, with the old MAC.
	bigger := bytes.Replace(plain, []byte("files 2\n"), []byte("files 3\n"), 1)

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
		{"a first-build zstd snapshot", zw.Bytes(), nil, ErrOldFormat},
		{"MAC under another key, re-encrypted to the operator", forged, []age.Identity{alice}, ErrNotAuthentic},
		{"header edited", bigger, nil, ErrNotAuthentic},
		{"plain body byte flipped", flip(plain, plainHdrEnd+100), nil, nil},
		{"plain MAC flipped", flip(plain, len(plain)-1), nil, ErrNotAuthentic},
		{"plain, last byte cut", plain[:len(plain)-1], nil, ErrDamaged},
		{"plain, data appended", append(append([]byte(nil), plain...), "more"...), nil, ErrDamaged},
		{"header tampered", flip(enc, hdrEnd-3), []age.Identity{alice}, nil},
		{"payload byte flipped early", flip(enc, hdrEnd+200), []age.Identity{alice}, ErrDamaged},
		{"payload byte flipped in the middle", flip(enc, len(enc)/2), []age.Identity{alice}, ErrDamaged},
		{"last byte flipped", flip(enc, len(enc)-1), []age.Identity{alice}, ErrDamaged},
		{"truncated in the header", enc[:hdrEnd/2], []age.Identity{alice}, ErrDamaged},
		{"truncated to half", enc[:len(enc)/2], []age.Identity{alice}, ErrDamaged},
		{"last byte cut", enc[:len(enc)-1], []age.Identity{alice}, ErrDamaged},
		{"data appended", append(append([]byte(nil), enc...), "more"...), []age.Identity{alice}, ErrDamaged},
		{"decrypts to something else", foreign.Bytes(), []age.Identity{alice}, ErrDamaged},
		{"unknown header line", unknownLine.Bytes(), []age.Identity{alice}, ErrDamaged},
	}
	raw := dk.Bytes()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := restore(tt.file, tt.ids, dk)
			if err == nil {
				t.Fatalf("restore succeeded (%d entries)", len(got))
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("restore error = %v, want %v", err, tt.want)
			}
			if tt.want == nil && !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrWrongIdentity) && !errors.Is(err, ErrNotAuthentic) {
				t.Fatalf("restore error = %v, want damaged, wrong identity or not authentic", err)
			}
			if bytes.Contains([]byte(err.Error()), raw) || strings.Contains(err.Error(), string(raw)) {
				t.Fatal("the error carries the data key")
			}
			t.Log(err)
		})
	}
}

// A body that decompresses beyond its header is refused after at most
// the announced bytes: a 64 KB bomb that would expand to 2 GB yields
// almost nothing.
func TestDecompressionBounded(t *testing.T) {
	dk, _ := crypto.GenerateDataKey()
	small := body([]byte("tiny store"))
	file := write(t, Options{MACKey: dk}, small)
	// Re-frame a bomb under the same (authentic) header: what a holder of
	// the key, or a damaged founder, could produce.
	hdrEnd := bytes.Index(file, []byte("\n\n")) + 2
	var bomb bytes.Buffer
	zw, _ := zstd.NewWriter(&bomb, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	zeros := make([]byte, 1<<20)
	for range 2048 {
		zw.Write(zeros)
	}
	zw.Close()
	if bomb.Len() > 256<<10 {
		t.Fatalf("the bomb is %d bytes", bomb.Len())
	}
	macKey, _ := dk.DeriveKey(macPurpose)
	mac := hmac.New(sha256.New, macKey)
	mac.Write(file[:hdrEnd])
	var out bytes.Buffer
	out.Write(file[:hdrEnd])
	fw := &frameWriter{w: &out, mac: mac}
	fw.Write(bomb.Bytes())
	fw.close()

	c, err := Open(bytes.NewReader(out.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Authenticate(dk); err != nil {
		t.Fatal(err)
	}
	var read int64
	for {
		e, err := c.Next()
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrDamaged) {
				t.Fatalf("bomb: %v", err)
			}
			break
		}
		n, err := io.Copy(io.Discard, e)
		read += n
		if err != nil {
			break
		}
	}
	if read > 64<<10 {
		t.Fatalf("%d bytes of the bomb came out", read)
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
	dk, _ := crypto.NewDataKey(make([]byte, 32))
	small := body([]byte("a tiny store"), "ca.pem", "pem")
	f.Add(write(f, Options{MACKey: dk}, small))
	f.Add(write(f, Options{Recipients: []age.Recipient{id.Recipient()}, MACKey: dk}, small))
	f.Add(write(f, Options{Recipients: []age.Recipient{id.Recipient()}, DataKey: dk, MACKey: dk}, small))
	f.Add([]byte("age-encryption.org/v1\n-> X25519 abc\n--- def\n"))
	f.Fuzz(func(t *testing.T, file []byte) {
		for _, ids := range [][]age.Identity{nil, {id}} {
			_, _, _ = restore(file, ids, dk)
		}
	})
}

// FuzzReadHeader aims at the plaintext header parser directly, which
// FuzzOpen reaches only through age's authentication.
func FuzzReadHeader(f *testing.F) {
	dk, _ := crypto.GenerateDataKey()
	f.Add(header(dk, body([]byte("s")).meta(), make([]byte, 32)))
	f.Add(header(nil, Meta{}, make([]byte, 32)))
	f.Add([]byte(magicLine + "\ndata-key AAAA\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Contents{r: bufio.NewReader(bytes.NewReader(data))}
		err := c.readHeader(true)
		if err == nil && c.DataKey != nil && !bytes.Contains(data, []byte(dataKeyWord)) {
			t.Fatal("a data key from a header without a data-key line")
		}
	})
}

// BenchmarkWrite measures what encryption adds to a backup: the same
// 64 MiB of already-compressed bytes written plain and through age.
func BenchmarkWrite(b *testing.B) {
	data := make([]byte, 64<<20)
	r := rand.NewChaCha8([32]byte{3, 4})
	r.Read(data)
	e := body(data)
	id := newIdentity(b)
	dk, _ := crypto.GenerateDataKey()
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"plain", Options{MACKey: dk}},
		{"age", Options{Recipients: []age.Recipient{id.Recipient()}, MACKey: dk}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Write(io.Discard, bc.opts, e.meta(), e.write); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package release

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
)

// WriteTar writes the signed release tree at dir as the tar stream the
// founder's upload takes (POST /v1/admin/releases/upload): the manifest
// and its signatures first, so the founder checks the signature before
// any other byte, then every file the manifest lists, in its order, at
// its listed size. It returns the manifest; advance (may be nil) is told
// each chunk of file bytes written.
func WriteTar(w io.Writer, dir string, advance func(n int64)) (*Manifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	mb, sb, err := ReadPayload(root)
	if err != nil {
		return nil, fmt.Errorf("%s: not a signed release tree (%s and %s): %w", dir, ManifestPath, SignaturePath, err)
	}
	m, err := ParseManifest(mb)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(w)
	for _, p := range []struct {
		name string
		b    []byte
	}{{ManifestPath, mb}, {SignaturePath, sb}} {
		if err := tw.WriteHeader(&tar.Header{Name: p.name, Mode: 0o644, Size: int64(len(p.b)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(p.b); err != nil {
			return nil, err
		}
	}
	for _, f := range m.Files {
		if err := writeTarFile(tw, root, f, advance); err != nil {
			return nil, err
		}
	}
	return m, tw.Close()
}

func writeTarFile(tw *tar.Writer, root *os.Root, f File, advance func(int64)) error {
	src, err := root.Open(f.Path)
	if err != nil {
		return badFile(f.Path, "", fmt.Sprintf("cannot be read: %v", UnwrapPath(err)))
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != f.Size {
		return badFile(f.Path, "", fmt.Sprintf("is %d bytes on disk, the manifest lists %d: sign the tree again", st.Size(), f.Size))
	}
	if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: 0o644, Size: f.Size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	var w io.Writer = tw
	if advance != nil {
		w = advanceWriter{tw, advance}
	}
	n, err := io.Copy(w, io.LimitReader(src, f.Size))
	if err == nil && n != f.Size {
		err = badFile(f.Path, "", "shrank while it was sent")
	}
	return err
}

type advanceWriter struct {
	w       io.Writer
	advance func(int64)
}

func (a advanceWriter) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.advance(int64(n))
	return n, err
}

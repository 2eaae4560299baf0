package tpm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// Counter is a TPM NV counter: an NV index of type counter in the owner
// hierarchy, which only ever goes up and survives restarts and a copy of
// the disk. The founder's audit high-water mark (SPEC 16.3) counts its
// writes with one, so an older copy of the mark file is told from the
// current one.
type Counter struct {
	path  string
	index tpm2.TPMHandle
}

// NewCounter names the counter at NV index (in the owner range
// 0x01000000-0x01FFFFFF) of the TPM at path (see Open).
func NewCounter(path string, index uint32) Counter {
	return Counter{path: path, index: tpm2.TPMHandle(index)}
}

// Index is the counter's NV index.
func (c Counter) Index() uint32 { return uint32(c.index) }

// Read returns the counter's value; defined is false when the TPM has no
// such index (or it was never incremented).
func (c Counter) Read() (value uint64, defined bool, err error) {
	t, err := Open(c.path)
	if err != nil {
		return 0, false, err
	}
	defer closeTPM(t, &err)
	name, ok, err := c.name(t)
	if err != nil || !ok {
		return 0, false, err
	}
	rsp, err := tpm2.NVRead{
		AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		NVIndex:    tpm2.NamedHandle{Handle: c.index, Name: name},
		Size:       8,
	}.Execute(t)
	if errors.Is(err, tpm2.TPMRCNVUninitialized) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read TPM NV counter 0x%08x: %w", uint32(c.index), err)
	}
	if len(rsp.Data.Buffer) != 8 {
		return 0, false, fmt.Errorf("TPM NV counter 0x%08x: %d bytes", uint32(c.index), len(rsp.Data.Buffer))
	}
	return binary.BigEndian.Uint64(rsp.Data.Buffer), true, nil
}

// Increment adds one to the counter, defining it first when the TPM has
// none, and returns the new value.
func (c Counter) Increment() (value uint64, err error) {
	t, err := Open(c.path)
	if err != nil {
		return 0, err
	}
	defer closeTPM(t, &err)
	name, ok, err := c.name(t)
	if err != nil {
		return 0, err
	}
	if !ok {
		if name, err = c.define(t); err != nil {
			return 0, err
		}
	}
	if _, err := (tpm2.NVIncrement{
		AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		NVIndex:    tpm2.NamedHandle{Handle: c.index, Name: name},
	}).Execute(t); err != nil {
		return 0, fmt.Errorf("increment TPM NV counter 0x%08x: %w", uint32(c.index), err)
	}
	if name, _, err = c.name(t); err != nil {
		return 0, err
	}
	rsp, err := tpm2.NVRead{
		AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		NVIndex:    tpm2.NamedHandle{Handle: c.index, Name: name},
		Size:       8,
	}.Execute(t)
	if err != nil {
		return 0, fmt.Errorf("read TPM NV counter 0x%08x: %w", uint32(c.index), err)
	}
	return binary.BigEndian.Uint64(rsp.Data.Buffer), nil
}

// name returns the index's current name; ok is false when it is not
// defined.
func (c Counter) name(t transport.TPM) (tpm2.TPM2BName, bool, error) {
	rsp, err := tpm2.NVReadPublic{NVIndex: c.index}.Execute(t)
	if errors.Is(err, tpm2.TPMRCHandle) {
		return tpm2.TPM2BName{}, false, nil
	}
	if err != nil {
		return tpm2.TPM2BName{}, false, fmt.Errorf("read TPM NV index 0x%08x: %w", uint32(c.index), err)
	}
	return rsp.NVName, true, nil
}

func (c Counter) define(t transport.TPM) (tpm2.TPM2BName, error) {
	def := tpm2.NVDefineSpace{
		AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		PublicInfo: tpm2.New2B(tpm2.TPMSNVPublic{
			NVIndex: c.index,
			NameAlg: tpm2.TPMAlgSHA256,
			Attributes: tpm2.TPMANV{
				OwnerWrite: true, OwnerRead: true, NT: tpm2.TPMNTCounter, NoDA: true,
			},
			DataSize: 8,
		}),
	}
	if _, err := def.Execute(t); err != nil {
		return tpm2.TPM2BName{}, fmt.Errorf("define TPM NV counter 0x%08x: %w", uint32(c.index), err)
	}
	pub, err := def.PublicInfo.Contents()
	if err != nil {
		return tpm2.TPM2BName{}, err
	}
	name, err := tpm2.NVName(pub)
	if err != nil {
		return tpm2.TPM2BName{}, err
	}
	return *name, nil
}

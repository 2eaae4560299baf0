package hostrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"stratum/osrelease"
	"stratum/wire"
)

// sysextImage is one entry of `systemd-sysext list --json=short`.
type sysextImage struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// sysextHierarchy is one entry of `systemd-sysext status --json=short`:
// extensions is the string "none" or the list of merged names.
type sysextHierarchy struct {
	Hierarchy  string          `json:"hierarchy"`
	Extensions json.RawMessage `json:"extensions"`
}

func parseSysextList(out []byte) ([]sysextImage, error) {
	var list []sysextImage
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("systemd-sysext list output is not a JSON list: %v", err)
	}
	for i, im := range list {
		if im.Name == "" {
			return nil, fmt.Errorf("systemd-sysext list: entry %d has no name", i)
		}
	}
	return list, nil
}

// parseSysextStatus returns the merged extension names.
func parseSysextStatus(out []byte) (map[string]bool, error) {
	var hs []sysextHierarchy
	if err := json.Unmarshal(out, &hs); err != nil {
		return nil, fmt.Errorf("systemd-sysext status output is not a JSON list: %v", err)
	}
	merged := map[string]bool{}
	for _, h := range hs {
		var none string
		if json.Unmarshal(h.Extensions, &none) == nil {
			if none != "none" {
				return nil, fmt.Errorf("systemd-sysext status: %s has extensions %q", h.Hierarchy, none)
			}
			continue
		}
		var names []string
		if err := json.Unmarshal(h.Extensions, &names); err != nil {
			return nil, fmt.Errorf("systemd-sysext status: %s: extensions is neither \"none\" nor a list of names", h.Hierarchy)
		}
		for _, n := range names {
			merged[n] = true
		}
	}
	return merged, nil
}

// collectExtensions lists every image systemd-sysext finds and every
// merged one. A merged extension's version and level come from its
// extension-release file, visible under /usr while it is merged.
func collectExtensions(ctx context.Context, h *Host, rec *wire.Record) error {
	out, err := h.Run.Run(ctx, "systemd-sysext", "list", "--json=short")
	if errors.Is(err, ErrMissing) {
		return nil
	}
	if err != nil {
		return err
	}
	list, err := parseSysextList(out)
	if err != nil {
		return err
	}
	out, err = h.Run.Run(ctx, "systemd-sysext", "status", "--json=short")
	if err != nil {
		return err
	}
	merged, err := parseSysextStatus(out)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	// Ran and found none is an empty list, never "not read" (null).
	exts := []wire.Extension{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		e := wire.Extension{Name: name, Merged: merged[name]}
		if e.Merged {
			e.Version, e.SysextLevel = extensionRelease(h.Root, name)
		}
		exts = append(exts, e)
	}
	for _, im := range list {
		add(im.Name)
	}
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(n)
	}
	rec.Extensions = exts
	return nil
}

// extensionRelease reads a merged extension's version (SYSEXT_VERSION_ID)
// and SYSEXT_LEVEL; empty when its file says none.
func extensionRelease(root, name string) (version, level string) {
	b, err := os.ReadFile(filepath.Join(root, "usr/lib/extension-release.d", "extension-release."+filepath.Base(name)))
	if err != nil {
		return "", ""
	}
	m := osrelease.Parse(b)
	return m["SYSEXT_VERSION_ID"], m["SYSEXT_LEVEL"]
}

package hostrecord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"stratum/wire"
)

// PackageSpec is one component of --packages: the component name and the
// package names that provide it, first installed one wins (Debian and
// RPM name the same software differently).
type PackageSpec struct {
	Component string
	Names     []string
}

// ParsePackages reads --packages: comma-separated entries, each
// `component=name1|name2` or a bare `name` (its own component).
func ParsePackages(s string) ([]PackageSpec, error) {
	var out []PackageSpec
	seen := map[string]bool{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		comp, names, ok := strings.Cut(entry, "=")
		if !ok {
			names = comp
		}
		spec := PackageSpec{Component: strings.TrimSpace(comp)}
		for n := range strings.SplitSeq(names, "|") {
			if n = strings.TrimSpace(n); n != "" {
				if !validPackageName(n) {
					return nil, fmt.Errorf("--packages: %q is not a package name", n)
				}
				spec.Names = append(spec.Names, n)
			}
		}
		if spec.Component == "" || len(spec.Names) == 0 {
			return nil, fmt.Errorf("--packages: entry %q needs a component and a package name", entry)
		}
		if seen[spec.Component] {
			return nil, fmt.Errorf("--packages: component %s is given twice", spec.Component)
		}
		seen[spec.Component] = true
		out = append(out, spec)
	}
	return out, nil
}

// validPackageName keeps option-looking or odd names away from the
// package tools' command lines.
func validPackageName(n string) bool {
	if n == "" || n[0] == '-' {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+-._", r)) {
			return false
		}
	}
	return true
}

// parseDpkg reads `dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n'`:
// only packages in state "ii" (installed, no error) count.
func parseDpkg(out []byte) (map[string]string, error) {
	got := map[string]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("dpkg-query printed an unexpected line %q", firstLine(line))
		}
		if strings.TrimSpace(f[2]) == "ii" && f[1] != "" {
			got[f[0]] = f[1]
		}
	}
	return got, nil
}

// parseRpm reads `rpm -q --qf '%{NAME}\t%{VERSION}-%{RELEASE}\n'`; the
// "package X is not installed" lines carry no tab and are skipped.
func parseRpm(out []byte) (map[string]string, error) {
	got := map[string]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if !strings.Contains(line, "\t") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 2 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("rpm printed an unexpected line %q", firstLine(line))
		}
		got[f[0]] = f[1]
	}
	return got, nil
}

// collectPackages asks dpkg, else rpm, for the named packages. A
// component none of whose packages is installed is left out (the skew
// compares it as "absent").
func collectPackages(ctx context.Context, h *Host, rec *wire.Record) error {
	if len(h.Packages) == 0 {
		return nil
	}
	var names []string
	for _, s := range h.Packages {
		names = append(names, s.Names...)
	}
	installed, manager, err := queryPackages(ctx, h.Run, names)
	if err != nil {
		return err
	}
	if !rec.ImageMode {
		rec.PackageManager = manager
	}
	pkgs := []wire.Package{}
	for _, s := range h.Packages {
		for _, n := range s.Names {
			if v, ok := installed[n]; ok {
				pkgs = append(pkgs, wire.Package{Component: s.Component, Name: n, Version: v})
				break
			}
		}
	}
	rec.Packages = pkgs
	return nil
}

// queryPackages asks dpkg-query, else rpm; it also names the one that
// answered (what the host's packages come from).
func queryPackages(ctx context.Context, run Runner, names []string) (map[string]string, string, error) {
	out, err := run.Run(ctx, "dpkg-query", append([]string{"-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", "--"}, names...)...)
	// dpkg-query exits 1 when some name is unknown, after listing the rest.
	var ee *ExitError
	if err == nil || errors.As(err, &ee) && ee.Code == 1 {
		got, err := parseDpkg(out)
		return got, "dpkg", err
	}
	if !errors.Is(err, ErrMissing) {
		return nil, "", err
	}
	out, err = run.Run(ctx, "rpm", append([]string{"-q", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n", "--"}, names...)...)
	// rpm exits with the number of names not installed.
	if err == nil || errors.As(err, &ee) && ee.Code > 0 && ee.Code <= len(names) {
		got, err := parseRpm(out)
		return got, "rpm", err
	}
	if errors.Is(err, ErrMissing) {
		return nil, "", errors.New("neither dpkg-query nor rpm is installed")
	}
	return nil, "", err
}

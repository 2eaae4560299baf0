package hostrecord

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"stratum/strictjson"
	"stratum/wire"
)

// PinsFile is the --pins-file: the images this node's control plane pins.
//
//	{"pins": [{"name": "ovn", "repository": "registry.example.com/stratum/ovn",
//	           "pinned": "registry.example.com/stratum/ovn@sha256:..."},
//	          {"name": "controlplane", "repository": "registry.example.com/stratum/controlplane", "self": true}]}
//
// A running container belongs to a pin when its image has the pin's
// repository. self marks the control plane's own image, which cannot
// name its own digest (pinned stays empty).
type PinsFile struct {
	Pins []PinSpec `json:"pins"`
}

// PinSpec is one pinned image.
type PinSpec struct {
	Name       string `json:"name"`
	Repository string `json:"repository"`
	Pinned     string `json:"pinned"`
	Self       bool   `json:"self"`
}

// parsePinsFile decodes strictly and checks each pin.
func parsePinsFile(b []byte) (PinsFile, error) {
	var pf PinsFile
	if err := strictjson.Decode(b, &pf); err != nil {
		return PinsFile{}, fmt.Errorf("pins file: %v", err)
	}
	names := map[string]bool{}
	for i, p := range pf.Pins {
		switch {
		case p.Name == "" || p.Repository == "":
			return PinsFile{}, fmt.Errorf("pins file: pins[%d] needs a name and a repository", i)
		case names[p.Name]:
			return PinsFile{}, fmt.Errorf("pins file: pins[%d]: %s is pinned twice", i, p.Name)
		case p.Self && p.Pinned != "":
			return PinsFile{}, fmt.Errorf("pins file: pins[%d]: the control plane's own image (self) has no pinned reference", i)
		case !p.Self && (p.Pinned == "" || repository(p.Pinned) != p.Repository):
			return PinsFile{}, fmt.Errorf("pins file: pins[%d]: pinned %q is not an image of repository %s", i, p.Pinned, p.Repository)
		}
		names[p.Name] = true
	}
	return pf, nil
}

// repository strips the digest and the tag from an image reference.
func repository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

func digestOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

// sameImage: the same reference, or the same digest of one repository.
func sameImage(a, b string) bool {
	return a == b || (digestOf(a) != "" && digestOf(a) == digestOf(b) && repository(a) == repository(b))
}

// parsePodmanPS reads `podman ps --format json` (one JSON list).
func parsePodmanPS(out []byte) ([]string, error) {
	var list []struct {
		Image string `json:"Image"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("podman ps output is not a JSON list: %v", err)
	}
	images := make([]string, 0, len(list))
	for i, c := range list {
		if c.Image == "" {
			return nil, fmt.Errorf("podman ps: container %d has no image", i)
		}
		images = append(images, c.Image)
	}
	return images, nil
}

// parseDockerPS reads `docker ps --format '{{json .}}'` (one object a line).
func parseDockerPS(out []byte) ([]string, error) {
	var images []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c struct {
			Image string `json:"Image"`
		}
		if err := json.Unmarshal(line, &c); err != nil || c.Image == "" {
			return nil, fmt.Errorf("docker ps printed a line that is not a container: %q", firstLine(string(line)))
		}
		images = append(images, c.Image)
	}
	return images, sc.Err()
}

// runningImages asks podman, else docker, for the running containers'
// images (one entry per container).
func runningImages(ctx context.Context, run Runner) ([]string, error) {
	out, err := run.Run(ctx, "podman", "ps", "--format", "json")
	if err == nil {
		return parsePodmanPS(out)
	}
	if !errors.Is(err, ErrMissing) {
		return nil, err
	}
	out, err = run.Run(ctx, "docker", "ps", "--no-trunc", "--format", "{{json .}}")
	if err == nil {
		return parseDockerPS(out)
	}
	if errors.Is(err, ErrMissing) {
		return nil, errors.New("no container runtime (podman or docker) is installed")
	}
	return nil, err
}

// comparePins sets each pin's state against the running images; images
// no pin names go to unpinned.
func comparePins(pf PinsFile, images []string) ([]wire.Pin, []wire.Unpinned) {
	pins := make([]wire.Pin, 0, len(pf.Pins))
	claimed := map[string]bool{}
	for _, spec := range pf.Pins {
		claimed[spec.Repository] = true
		p := wire.Pin{Name: spec.Name, Pinned: spec.Pinned, State: wire.PinAbsent}
		for _, im := range images {
			if repository(im) != spec.Repository {
				continue
			}
			p.Containers++
			switch {
			case spec.Self:
				p.State = wire.PinSelf
				if p.Running == "" {
					p.Running = im
				}
			case !sameImage(im, spec.Pinned):
				p.State, p.Running = wire.PinDiffers, im
			case p.State == wire.PinAbsent:
				p.State = wire.PinCurrent
			}
		}
		if spec.Self {
			p.State = wire.PinSelf
		}
		pins = append(pins, p)
	}
	var unpinned []wire.Unpinned
	index := map[string]int{}
	for _, im := range images {
		if claimed[repository(im)] {
			continue
		}
		if i, ok := index[im]; ok {
			unpinned[i].Containers++
			continue
		}
		index[im] = len(unpinned)
		unpinned = append(unpinned, wire.Unpinned{Image: im, Containers: 1})
	}
	return pins, unpinned
}

// collectPins reads the pins file and what runs. Without a runtime the
// pins cannot be compared, so neither pins nor unpinned is reported.
func collectPins(ctx context.Context, h *Host, rec *wire.Record) error {
	if h.PinsFile == "" {
		return nil
	}
	b, err := os.ReadFile(h.PinsFile)
	if err != nil {
		return fmt.Errorf("pins file: %v", err)
	}
	pf, err := parsePinsFile(b)
	if err != nil {
		return err
	}
	images, err := runningImages(ctx, h.Run)
	if err != nil {
		return err
	}
	rec.Pins, rec.Unpinned = comparePins(pf, images)
	return nil
}

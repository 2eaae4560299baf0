package releaseset

// PinState compares a pinned image with what runs.
type PinState string

const (
	// PinCurrent: every container of this image runs the pin.
	PinCurrent PinState = "current"
	// PinDiffers: a container runs another image (see Pin.Running).
	PinDiffers PinState = "differs"
	// PinAbsent: nothing of this image runs here, which is normal for an
	// image the node's role or the install's profile does not run.
	PinAbsent PinState = "absent"
	// PinSelf: the control plane's own image. Its pin names the build
	// before it, so it is compared between nodes, not with the pin.
	PinSelf PinState = "self"
)

// Pin is one image the node's control plane pins, against what runs.
type Pin struct {
	Name string `json:"name"`
	// Pinned is the pinned reference; empty for the control plane's own
	// image (state self): an image cannot embed its own digest.
	Pinned string   `json:"pinned"`
	State  PinState `json:"state"`
	// Running is what runs in place of the pin, or the control plane's own
	// image (self).
	Running string `json:"running,omitempty"`
	// Containers counts the running containers of this image.
	Containers int `json:"containers"`
}

// Unpinned is an image running containers use that no pin names.
type Unpinned struct {
	Image      string `json:"image"`
	Containers int    `json:"containers"`
}

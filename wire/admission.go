package wire

// SetAdmissionRequest is the body of PUT /v1/admin/cluster/release: the
// admission release joiners are admitted on (SPEC 10.2).
type SetAdmissionRequest struct {
	Release        string `json:"release"`
	AllowDowngrade bool   `json:"allowDowngrade"`
}

// AdmissionView answers PUT /v1/admin/cluster/release.
type AdmissionView struct {
	AdmissionRelease string `json:"admissionRelease"`
	Previous         string `json:"previous"`
}

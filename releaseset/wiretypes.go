package releaseset

import "stratum/wire"

// The node's release record is a wire shape (package wire), shared with the
// agent that sends it; these names let the domain code say Record.
type (
	Record        = wire.Record
	RecordRequest = wire.RecordRequest
	OS            = wire.OS
	Bootc         = wire.Bootc
	Deployment    = wire.Deployment
	ControlPlane  = wire.ControlPlane
	HostSource    = wire.HostSource
	HostBinaries  = wire.HostBinaries
	Extension     = wire.Extension
	Package       = wire.Package
	PinState      = wire.PinState
	Pin           = wire.Pin
	Unpinned      = wire.Unpinned
	Payload       = wire.Payload
	Storage       = wire.Storage
	StoredRelease = wire.StoredRelease
	StoredDir     = wire.StoredDir
)

const (
	SourceOSImage           = wire.SourceOSImage
	SourceOverlay           = wire.SourceOverlay
	SourceControlPlaneImage = wire.SourceControlPlaneImage
	CommitMixed             = wire.CommitMixed
	CommitUnknown           = wire.CommitUnknown
	PinCurrent              = wire.PinCurrent
	PinDiffers              = wire.PinDiffers
	PinAbsent               = wire.PinAbsent
	PinSelf                 = wire.PinSelf
)

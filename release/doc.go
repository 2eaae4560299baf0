// Package release is the signed-release format: the manifest and its
// ed25519 signatures, release keys, verification of a release tree and
// signing (SPEC 5.1). It touches no store: the joiner verifies releases
// with it too. The founder's repository of imported releases is package
// release/repo.
//
// Decisions taken where the specification is silent:
//
//   - Key files are PEM: NAME.key holds the private key as PKCS#8
//     ("PRIVATE KEY"), NAME.pub the public key as PKIX ("PUBLIC KEY"), the
//     formats `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout`
//     read and write, so keys can be made and inspected with stock tools.
//     A private key readable by group or others is refused, as ssh does.
//   - A keyId is the lowercase hex of the SHA-256 of the raw 32-byte ed25519
//     public key: stable, independent of the PEM wrapping, and computable by
//     anyone holding the public key.
//   - A sysext entry is made for every sysext/*.raw file. Its name and
//     version come from the systemd convention NAME_VERSION.raw (without an
//     underscore the version is the release). Its rootHash is the content of
//     the sidecar sysext/NAME.roothash when the tree has one (the file
//     systemd-dissect reads for dm-verity), else the SHA-256 of the image.
//   - os.imageVersion is "v" + release; os.layout is the first 8 hex digits
//     of the SHA-256 over the sorted "path sha256\n" lines of the files under
//     os/, so two releases with the same OS bytes share a layout id.
package release

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"stratum/crypto"
)

// credentials is $XDG_CONFIG_HOME/stratum/credentials (mode 0600): the
// session token of stratum login, per admin API URL.
type credentials struct {
	Sessions map[string]session `json:"sessions"`
}

type session struct {
	Token     string    `json:"token"`
	Email     string    `json:"email,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`
	// CAFile is the CA certificate login trusted, as an absolute path:
	// the later commands trust it from any directory.
	CAFile string `json:"caFile,omitempty"`
}

// credentialsPath is $XDG_CONFIG_HOME/stratum/credentials, with
// XDG_CONFIG_HOME defaulting to ~/.config.
func credentialsPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no XDG_CONFIG_HOME and no home directory for the credentials file: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "stratum", "credentials"), nil
}

// loadCredentials reads the file; a missing one is empty. A file others
// can read is refused, as ssh refuses a readable private key.
func loadCredentials() (credentials, error) {
	c := credentials{Sessions: map[string]session{}}
	path, err := credentialsPath()
	if err != nil {
		return c, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return c, fmt.Errorf("%s is mode %04o: others may read its session tokens; chmod 600 it or log in again", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w (remove it and log in again)", path, err)
	}
	if c.Sessions == nil {
		c.Sessions = map[string]session{}
	}
	return c, nil
}

// save writes the file atomically, mode 0600, in a 0700 directory.
func (c credentials) save() (string, error) {
	path, err := credentialsPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	return path, crypto.WriteFileAtomic(path, append(b, '\n'), 0o600)
}

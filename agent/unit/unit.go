// Package unit is the agent's systemd unit (SPEC 11): printed by
// `stratum agent --print-systemd-unit`, shipped as
// dist/stratum-agent.service and installed by `stratum join
// --install-agent`. It imports nothing of the agent, so the joiner can
// carry it.
package unit

import "strings"

// Name is the unit's file name.
const Name = "stratum-agent.service"

// EnvFile holds the agent's flags as STRATUM_* variables (STRATUM_API,
// STRATUM_PACKAGES, ...); the joiner writes it with --install-agent.
const EnvFile = "/etc/stratum/agent.env"

// DefaultExecutable is where a node's stratum binary lives.
const DefaultExecutable = "/usr/bin/stratum"

const template = `[Unit]
Description=Stratum node agent: release record, membership, boot health
Wants=network-online.target
After=network-online.target
ConditionPathExists=/etc/stratum/node.yaml

[Service]
Type=simple
EnvironmentFile=-/etc/stratum/agent.env
ExecStart=@EXE@ agent
Restart=always
RestartSec=5s
# Root: bootc status and the container runtime need it. Everything else
# is taken away.
NoNewPrivileges=yes
ProtectSystem=strict
# members.json is written next to node.yaml; podman takes its locks even
# for ps. Nothing else is writable.
ReadWritePaths=/etc/stratum -/run/containers -/run/libpod -/var/lib/containers
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
UMask=0022

[Install]
WantedBy=multi-user.target
`

// Render is the unit running exe.
func Render(exe string) string {
	if exe == "" {
		exe = DefaultExecutable
	}
	return strings.ReplaceAll(template, "@EXE@", exe)
}

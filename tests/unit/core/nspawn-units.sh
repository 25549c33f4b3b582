#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Boots a Debian container under systemd-nspawn, installs kfdbroker there with
# `meson install` (units, sysusers, tmpfiles, bus policy, polkit actions, the
# daemon), and checks the sandbox for real:
#   - systemd-sysusers creates kfdbroker; kfdbrokerd.socket listens;
#   - a connection from user nobody socket-activates kfdbrokerd.service
#     (Type=notify) and `kfdbrokerctl status` is answered through it;
#   - inside the sandbox (an ExecStartPre= with the same settings) /dev/kfd and
#     /dev/dri/renderD128 are present and readable through PrivateDevices= +
#     BindPaths=, no other device is, /etc is read-only, and another user's
#     /proc/PID/cgroup and status are readable (ProtectProc=default);
#   - `systemctl reload` (SIGHUP) keeps the daemon running;
#   - a client with buffers and a job on the GPU lives through `systemctl restart`;
#   - worker processes work inside the unit's sandbox (the simulated kernel at
#     KFD 1.18 has no secondary contexts): nobody's `kfdbrokerctl demo` runs
#     its kernel in a worker of user kfdbroker, which leaves with the daemon.
# The device nodes are stand-ins (mknod with /dev/zero's numbers) because the
# host has no GPU. Not part of the default `meson test` or `./dev test` (about
# a minute the first time, to build the rootfs, and it needs the network, root,
# mmdebstrap and systemd-container). It runs as the meson test 'nspawn-units'
# (suite 'nspawn') in a build configured with -Dslow_tests=true --prefix=/usr,
# and skips (77) where it cannot run; or by hand:
#   tests/unit/core/nspawn-units.sh BUILD_DIR [ROOTFS_CACHE]
# (BUILD_DIR configured with --prefix=/usr, as a distribution would)
set -euo pipefail

if [[ $(id -u) != 0 ]] || ! command -v mmdebstrap >/dev/null || ! command -v systemd-nspawn >/dev/null; then
        echo "needs root, mmdebstrap and systemd-nspawn (apt-get install mmdebstrap systemd-container)"
        exit 77
fi

build=$(realpath "$1")
cache=${2:-/var/tmp/kfdb-nspawn}
# What the container needs: systemd and friends, and every library the
# installed daemon and client link (readelf -d build/daemon/kfdbrokerd).
packages=systemd,systemd-sysv,dbus,polkitd,udev,libpam-systemd,libsystemd0,libprotobuf-c1,libdrm-amdgpu1,libdrm2,libelf1,libmsgpackc2,libseccomp2
# The cached root filesystem is keyed by that list, so a new library makes a new one.
rootfs=$cache/rootfs-$(printf %s "$packages" | sha1sum | cut -c1-12)
tmp=$(mktemp -d /tmp/kfdb-nspawn.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if [[ ! -x $rootfs/usr/lib/systemd/systemd ]]; then
        mkdir -p "$cache"
        mmdebstrap --variant=minbase \
                --include="$packages" \
                --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
                bookworm "$rootfs"
fi
# The runner: a oneshot that powers the container off when done.
cat >"$rootfs/etc/systemd/system/kfdb-test.service" <<'EOF'
[Unit]
After=multi-user.target dbus.service
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
ExecStart=/bin/sh /mnt/host/run.sh
StandardOutput=file:/mnt/host/out.txt
StandardError=inherit
[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/kfdb-test.service "$rootfs/etc/systemd/system/multi-user.target.wants/kfdb-test.service"

meson install -C "$build" --destdir "$tmp/dest" >/dev/null
mkdir "$tmp/host"
# A client that must live through `systemctl restart` (tests/integration/restart-client.c).
cp "$build/tests/integration/restart-client" "$tmp/host/"
cat >"$tmp/host/run.sh" <<'EOF'
set -u
fail=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fail=1; fi; }
# Worker processes (kfdbrokerd --worker) alive now; no procps in the rootfs.
workers() { for p in /proc/[0-9]*; do tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q '^kfdbrokerd --worker ' && echo "${p#/proc/}"; done; true; }

tar -C /mnt/dest -cf - . | tar -C / -xf - --keep-directory-symlink
systemd-sysusers
systemd-tmpfiles --create kfdbroker.conf
check "sysusers made kfdbroker, in render and not video" 'id kfdbroker | grep -q render && ! id kfdbroker | grep -q video'

# Stand-ins for the GPU's nodes.
mknod -m 0666 /dev/kfd c 1 5
mkdir -p /dev/dri && mknod -m 0666 /dev/dri/renderD128 c 1 5

# Another user's process whose /proc the daemon must be able to read.
setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 &
peer=$!

mkdir -p /etc/systemd/system/kfdbrokerd.service.d
cat >/etc/systemd/system/kfdbrokerd.service.d/test.conf <<EOT
[Service]
ExecStartPre=/bin/sh -c 'exec >/run/kfdbroker/sandbox.txt 2>&1; \
  test -c /dev/kfd && echo kfd-present; \
  test -c /dev/dri/renderD128 && echo render-present; \
  head -c 8 /dev/kfd | wc -c | sed s/^/kfd-read-/; \
  ls /dev | tr "\\\\n" " " | sed "s/^/dev: /"; echo; \
  touch /etc/kfdb-probe 2>/dev/null || echo etc-readonly; \
  cat /proc/$peer/cgroup >/dev/null && echo peer-cgroup-readable; \
  grep -q "^Groups:" /proc/$peer/status && echo peer-status-readable; \
  id -un'
ExecStart=
ExecStart=/usr/libexec/kfdbrokerd --device=sim --sim-kfd-version=1.18 --bus=system
EOT
systemctl daemon-reload
# dbus-daemon read its policy at boot, before the files were copied in.
busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig
systemctl start kfdbrokerd.socket
check "kfdbrokerd.socket is listening" 'systemctl is-active -q kfdbrokerd.socket'
check "socket is a 0666 SEQPACKET socket" 'test "$(stat -c %a /run/kfdbroker/kfdbroker.sock)" = 666'
check "kfdbrokerd.service not yet running" '! systemctl is-active -q kfdbrokerd.service'

out=$(setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl status 2>&1)
echo "$out" | sed 's/^/    /'
check "kfdbrokerctl status as nobody is answered" '[ -n "$out" ] && systemctl is-active -q kfdbrokerd.service'
check "Type=notify: the service reached active (READY=1)" 'systemctl show -P ActiveState kfdbrokerd.service | grep -qx active'
check "runs as kfdbroker" 'stat -c %U /proc/$(systemctl show -P MainPID kfdbrokerd.service) | grep -qx kfdbroker'
sed 's/^/    /' /run/kfdbroker/sandbox.txt
check "/dev/kfd visible in the sandbox" 'grep -qx kfd-present /run/kfdbroker/sandbox.txt'
check "/dev/dri/renderD128 visible in the sandbox" 'grep -qx render-present /run/kfdbroker/sandbox.txt'
check "/dev/kfd readable in the sandbox" 'grep -qx kfd-read-8 /run/kfdbroker/sandbox.txt'
check "no block devices or other hardware in the sandbox /dev" 'grep -q "^dev: " /run/kfdbroker/sandbox.txt && ! grep -Eq "^dev: .*(sda|vda|nvme|loop|mem |port |kmsg)" /run/kfdbroker/sandbox.txt'
check "/etc is read-only in the sandbox" 'grep -qx etc-readonly /run/kfdbroker/sandbox.txt'
check "another user's /proc/PID/cgroup is readable" 'grep -qx peer-cgroup-readable /run/kfdbroker/sandbox.txt'
check "another user's /proc/PID/status is readable" 'grep -qx peer-status-readable /run/kfdbroker/sandbox.txt'
check "sandbox runs as kfdbroker" 'tail -1 /run/kfdbroker/sandbox.txt | grep -qx kfdbroker'

# D-Bus: the bus policy lets kfdbroker own the name, activation started the
# unit, everyone may introspect; admin methods go through polkit.
check "polkit knows org.kfdbroker.manage (auth_admin_keep)" 'pkaction --action-id org.kfdbroker.manage --verbose | grep -q "implicit active: *auth_admin_keep"'
check "polkit knows org.kfdbroker.read-all" 'pkaction --action-id org.kfdbroker.read-all --verbose | grep -q "implicit any: *auth_admin_keep"'
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups busctl --system introspect org.kfdbroker.Broker1 /org/kfdbroker/Broker1 2>&1)
echo "$out" | head -12 | sed 's/^/    /'
check "nobody can introspect org.kfdbroker.Broker1" 'echo "$out" | grep -q "^org.kfdbroker.Broker1 *interface"'
busctl --system status org.kfdbroker.Broker1 | grep -Ei "^(EUID|UID|Unit|Comm)=" | sed 's/^/    /'
check "the name is owned by kfdbrokerd as kfdbroker" 'busctl --system status org.kfdbroker.Broker1 | grep -Eq "^EUID=$(id -u kfdbroker)$"'
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups dbus-send --system --print-reply --dest=org.kfdbroker.Broker1 /org/kfdbroker/Broker1 org.kfdbroker.Broker1.ReloadPolicy 2>&1)
echo "    nobody ReloadPolicy: $out"
check "nobody may not ReloadPolicy: polkit was asked and said no" 'echo "$out" | grep -q "org.kfdbroker.manage" && ! echo "$out" | grep -q "could not be asked"'
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus RequestName su org.kfdbroker.Broker1 4 2>&1)
check "nobody may not own org.kfdbroker.Broker1" 'echo "$out" | grep -qi "access denied"'
check "root may ReloadPolicy" 'busctl --system call org.kfdbroker.Broker1 /org/kfdbroker/Broker1 org.kfdbroker.Broker1 ReloadPolicy'
systemctl stop kfdbrokerd.service
out=$(busctl --system introspect org.kfdbroker.Broker1 /org/kfdbroker/Broker1 2>&1)
check "a D-Bus call activates the stopped service (SystemdService=)" 'systemctl is-active -q kfdbrokerd.service && echo "$out" | grep -q "^org.kfdbroker.Broker1 *interface"'

pid=$(systemctl show -P MainPID kfdbrokerd.service)
check "systemctl reload succeeds" 'systemctl reload kfdbrokerd.service'
sleep 0.5
check "the reload (SIGHUP) keeps the same daemon" '[ "$(systemctl show -P MainPID kfdbrokerd.service)" = "$pid" ] && systemctl is-active -q kfdbrokerd.service'

# Worker processes under the unit's sandbox (SystemCallFilter=, NoNewPrivileges=, ...).
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl status 2>&1)
check "the daemon runs a worker process per GPU context" 'echo "$out" | grep -q "^contexts: process: "'
out=$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl demo --size=1M --elements=4096 2>&1)
echo "$out" | sed 's/^/    /'
check "nobody's demo runs its kernel (in a worker)" 'echo "$out" | grep -q "elements of y through its dma-buf mapping against the CPU: correct"'
sleep 1
check "the demo's worker was given up when its session ended" '[ -z "$(workers)" ]'

# A package upgrade restarts the service: a client holding buffers and a job on the GPU goes on
# in the new daemon (docs/protocol.md "When the daemon restarts").
install -m 0755 /mnt/host/restart-client /usr/local/bin/restart-client
mkfifo /tmp/restart-in
setpriv --reuid=65534 --regid=65534 --clear-groups restart-client </tmp/restart-in >/tmp/restart-out 2>&1 &
client=$!
exec 7>/tmp/restart-in
for i in $(seq 100); do grep -q '^ready' /tmp/restart-out && break; sleep 0.1; done
pid=$(systemctl show -P MainPID kfdbrokerd.service)
systemctl restart kfdbrokerd.service
check "systemctl restart starts a new daemon" '[ "$(systemctl show -P MainPID kfdbrokerd.service)" != "$pid" ] && systemctl is-active -q kfdbrokerd.service'
echo go >&7
exec 7>&-
wait $client; rc=$?
sed 's/^/    restart-client: /' /tmp/restart-out
check "a client with buffers and a job on the GPU lives through systemctl restart" '[ $rc = 0 ] && grep -q "^ok - the session reconnected once" /tmp/restart-out'

journalctl -q -u kfdbrokerd.service --no-pager | tail -15 | sed 's/^/    journal: /'
systemctl stop kfdbrokerd.service
check "stops cleanly" '! systemctl is-failed -q kfdbrokerd.service'
check "no worker outlives the daemon" '[ -z "$(workers)" ]'
kill $peer
echo "exit $fail"
EOF

systemd-nspawn -q --register=no --keep-unit -D "$rootfs" --volatile=overlay \
        --bind="$tmp/host:/mnt/host" --bind-ro="$tmp/dest:/mnt/dest" -b >"$tmp/boot.log" 2>&1 || true
if [[ ! -f $tmp/host/out.txt ]]; then
        echo "the container did not run the test:"
        tail -30 "$tmp/boot.log"
        exit 1
fi
cat "$tmp/host/out.txt"
passed=$(grep -c '^ok - ' "$tmp/host/out.txt" || true)
failed=$(grep -c '^not ok - ' "$tmp/host/out.txt" || true)
echo "$passed passed, $failed failed"
[[ $failed == 0 && $passed -gt 0 ]]

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Boots a Debian container under systemd-nspawn, installs kfdbroker there with
# `meson install` (units, sysusers, tmpfiles, bus policy, polkit actions, the
# journal catalog, completions, the daemon), and checks the sandbox for real:
#   - the README's four install commands, verbatim (systemd-sysusers,
#     systemd-tmpfiles --create, daemon-reload, enable --now), right after
#     the files were copied in: dbus-daemon reads the bus policy as it
#     appears, before systemd-sysusers makes kfdbroker, and nothing but the
#     daemon asks it to read it again (no ReloadConfig here); kfdbrokerd.socket
#     listens and /run/cdi/kfdbroker.json holds the CDI spec until it stops;
#   - a connection from user nobody socket-activates kfdbrokerd.service
#     (Type=notify) and `kfdbrokerctl status` is answered through it;
#   - inside the sandbox (an ExecStartPre= with the same settings) /dev/kfd and
#     /dev/dri/renderD128 are present and readable through PrivateDevices= +
#     BindPaths=, no other device is, /etc is read-only, and another user's
#     /proc/PID/cgroup and status are readable (ProtectProc=default);
#   - D-Bus: the bus policy (only kfdbroker owns the name, everyone may
#     introspect), activation of the stopped service by a call, polkit's
#     actions and its refusal for nobody;
#   - journald: the daemon's entries carry their MESSAGE_IDs and the session
#     fields (the nobody session of the runner unit is found by
#     KFDBROKER_UID, KFDBROKER_UNIT and KFDBROKER_SESSION, its opening and its
#     closing), and the catalog explains them (journalctl -x);
#   - `systemctl reload` of a broken policy fails, saying why (ExecReload=
#     runs `kfdbrokerctl reload`), keeps the same daemon and the old policy
#     (a new session still gets the good rule), and a fixed one reloads;
#   - polkit asks: nobody's `kfdbrokerctl reload` on a terminal starts
#     pkttyagent, which asks for root's password (right: reloaded; wrong:
#     refused), and with --no-ask-password it is refused at once;
#   - a client with buffers and a job on the GPU lives through `systemctl
#     restart`, and the new daemon logs its resumed session (SESSION_RESUMED)
#     after the old one's shutdown (SHUTTING_DOWN, SESSION_ENDED);
#   - --metrics-file-mode=0644 lets another user read the metrics file under
#     the unit's UMask=0077;
#   - worker processes work inside the unit's sandbox (the simulated kernel at
#     KFD 1.18 has no secondary contexts): nobody's `kfdbrokerctl demo` runs
#     its kernel in a worker of user kfdbroker, which leaves with the daemon.
#   - a second boot with the files in place before it (bind-mounted: a
#     package installed into an image) and no GPU: the same four commands,
#     then the service stays up with STATUS= "no AMD GPU: ...", every client
#     and D-Bus call is told so, it is never restarted and its socket unit
#     never fails; kfdbrokerd(8)'s simulator drop-in then serves the
#     simulated GPU.
# The device nodes of the first boot are stand-ins (mknod with /dev/zero's numbers) because the
# host has no GPU. It runs in `./dev test` as the meson test 'nspawn-units'
# (suite 'nspawn', once: not in sanitizer builds) in a build configured with
# --prefix=/usr, as a distribution would (./dev does). It needs root,
# mmdebstrap and systemd-nspawn (./dev test installs them), and the Debian
# archive the first time, to build the root filesystem (about a minute;
# cached in /var/tmp/kfdb-nspawn by its package list). Where one of these is
# missing it skips (77), naming it. By hand:
#   tests/unit/core/nspawn-units.sh BUILD_DIR [ROOTFS_CACHE]
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (it boots a container and installs into it)"
command -v mmdebstrap >/dev/null || skip "needs mmdebstrap (apt-get install mmdebstrap)"
command -v systemd-nspawn >/dev/null || skip "needs systemd-nspawn (apt-get install systemd-container)"

build=$(realpath "$1")
prefix=$(meson introspect --buildoptions "$build" | grep -o '"name": "prefix", "value": "[^"]*"' | sed 's/.*"value": "//; s/"$//')
[[ $prefix == /usr ]] || skip "needs a build configured with --prefix=/usr (this one has '$prefix'; ./dev configures build so)"
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
        # Built aside and renamed when complete: an interrupted build is never used.
        rm -rf "$rootfs.tmp"
        if ! mmdebstrap --variant=minbase \
                --include="$packages" \
                --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
                bookworm "$rootfs.tmp" >"$tmp/mmdebstrap.log" 2>&1; then
                tail -5 "$tmp/mmdebstrap.log"
                rm -rf "$rootfs.tmp"
                skip "mmdebstrap could not build the Debian root filesystem (is the Debian archive reachable?)"
        fi
        mv "$rootfs.tmp" "$rootfs"
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

meson install -C "$build" --no-rebuild --destdir "$tmp/dest" >/dev/null
mkdir "$tmp/host"
# A client that must live through `systemctl restart` (tests/integration/restart-client.c).
cp "$build/tests/integration/restart-client" "$tmp/host/"
cat >"$tmp/host/run.sh" <<'EOF'
set -u
fail=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fail=1; fi; }
# Worker processes (kfdbrokerd --worker) alive now; no procps in the rootfs.
workers() { for p in /proc/[0-9]*; do tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q '^kfdbrokerd --worker ' && echo "${p#/proc/}"; done; true; }

# The journal's entries of one MESSAGE_ID (and more matches), as KEY=VALUE lines.
entries() { journalctl -q --no-pager -o export "MESSAGE_ID=$@" 2>/dev/null; }
# The value of FIELD in the last entry matching the rest.
last_field() { local f=$1; shift; entries "$@" | sed -n "s/^$f=//p" | tail -1; }
MSG_READY=465d0f4138044c94bbf095884326fdc8
MSG_OPENED=171de76a94a04903bf4201b4f08e9564
MSG_CLOSED=f588fb37f4474ff5b3db2bf8eea07aeb
MSG_RELOADED=c99222b1f1634bf591681a214ae4f496
MSG_RELOAD_FAILED=edd4e5628305495a9418c75a6f4dcb49
MSG_SHUTTING_DOWN=188a6a2d2ecc478bac5e1f41c59a5b0b
MSG_ENDED=3180036822904ce8961dfe6a89bf0d87
MSG_RESUMED=8abe204c4dbe437693de8e2fa4a69841

tar -C /mnt/dest -cf - . | tar -C / -xf - --keep-directory-symlink
journalctl --update-catalog
check "completions installed for bash, zsh and fish" 'test -f /usr/share/bash-completion/completions/kfdbrokerctl && test -f /usr/share/zsh/site-functions/_kfdbrokerctl && test -f /usr/share/fish/vendor_completions.d/kfdbrokerctl.fish'
check "libkfdbroker(3) installed" 'test -f /usr/share/man/man3/libkfdbroker.3 || test -f /usr/share/man/man3/libkfdbroker.3.gz'

# polkit's administrator here is root (Debian's default rule names the group
# sudo, which is empty), with a password the agent test types.
echo root:kfdb-test-pw | chpasswd
mkdir -p /etc/polkit-1/rules.d
echo 'polkit.addAdminRule(function(action, subject) { return ["unix-user:0"]; });' >/etc/polkit-1/rules.d/10-kfdb-test-admin.rules
systemctl restart polkit.service

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
ExecStart=/usr/libexec/kfdbrokerd --device=sim --sim-kfd-version=1.18 --bus=system \
  --metrics-file=/run/kfdbroker/kfdbroker.prom --metrics-file-mode=0644 --metrics-interval=0.2
EOT
# The README's four commands, verbatim. dbus-daemon read the bus policy when
# tar put it in system.d, before systemd-sysusers made kfdbroker; nothing here
# tells it to read it again (the daemon does, when its name is refused).
systemd-sysusers && systemd-tmpfiles --create kfdbroker.conf
systemctl daemon-reload && systemctl enable --now kfdbrokerd.socket
check "sysusers made kfdbroker, in render and not video" 'id kfdbroker | grep -q render && ! id kfdbroker | grep -q video'
check "kfdbrokerd.socket is listening" 'systemctl is-active -q kfdbrokerd.socket'
check "the CDI spec is in /run/cdi while the socket listens, naming the socket" 'grep -q "\"hostPath\": \"/run/kfdbroker/kfdbroker.sock\"" /run/cdi/kfdbroker.json && test "$(stat -c %a /run/cdi)" = 755'
check "the CDI spec has a device per GPU socket, each mounting its socket" 'grep -q "\"name\": \"7\"" /run/cdi/kfdbroker.json && grep -q "\"hostPath\": \"/run/kfdbroker/kfdbroker-gpu1.sock\"" /run/cdi/kfdbroker.json && test -S /run/kfdbroker/kfdbroker-gpu7.sock'
check "socket is a 0666 SEQPACKET socket" 'test "$(stat -c %a /run/kfdbroker/kfdbroker.sock)" = 666'
check "kfdbrokerd.service not yet running" '! systemctl is-active -q kfdbrokerd.service'

out=$(setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl status 2>&1)
echo "$out" | sed 's/^/    /'
check "kfdbrokerctl status as nobody is answered" '[ -n "$out" ] && systemctl is-active -q kfdbrokerd.service'
check "Type=notify: the service reached active (READY=1)" 'systemctl show -P ActiveState kfdbrokerd.service | grep -qx active'
check "runs as kfdbroker" 'stat -c %U /proc/$(systemctl show -P MainPID kfdbrokerd.service) | grep -qx kfdbroker'
journalctl -q -u kfdbrokerd.service -o cat --no-pager | grep -E "bus refused|on the bus" | sed 's/^/    journal: /'
check "the bus read its policy before kfdbroker existed: refused, re-read at the daemon's request, granted" 'journalctl -q -u kfdbrokerd.service -o cat --no-pager | grep -q "^The bus refused the name org.kfdbroker.Broker1 (.*); asking it to re-read its configuration" && journalctl -q -u kfdbrokerd.service -o cat --no-pager | grep -qx "Serving org.kfdbroker.Broker1 on the bus"'

# The journal: the nobody session of this runner unit, by its fields.
sleep 0.3
sid=$(last_field KFDBROKER_SESSION $MSG_OPENED KFDBROKER_UID=65534 KFDBROKER_UNIT=kfdb-test.service)
entries $MSG_OPENED KFDBROKER_SESSION="$sid" | grep -E '^(MESSAGE|PRIORITY|KFDBROKER_[A-Z_]*)=' | sed 's/^/    journal: /'
check "journal: SESSION_OPENED with KFDBROKER_SESSION, _UID=65534, _UNIT=kfdb-test.service, priority info" '[ -n "$sid" ] && entries $MSG_OPENED KFDBROKER_SESSION=$sid | grep -qx "PRIORITY=6"'
check "journal: SESSION_CLOSED for the same session, with the client's name" 'entries $MSG_CLOSED KFDBROKER_SESSION=$sid KFDBROKER_UID=65534 | grep -qx "KFDBROKER_CLIENT=kfdbrokerctl"'
check "journal: every entry of the session is found by KFDBROKER_SESSION alone" '[ "$(journalctl -q -u kfdbrokerd.service KFDBROKER_SESSION=$sid -o cat | wc -l)" -ge 2 ]'
check "journal: READY with the version and backend" 'entries $MSG_READY | grep -qx "KFDBROKER_BACKEND=sim"'

# Container= by id: a client in a scope named as docker's systemd cgroup driver
# names a container's scope is known by the container's full id and short id.
cid=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
out=$(systemd-run --quiet --scope --unit="docker-$cid.scope" \
        kfdbrokerctl --socket /run/kfdbroker/kfdbroker.sock --json sessions 2>&1)
printf "    sessions from docker-%s.scope: %.300s\n" "$cid" "$out"
check "a client in docker-<id>.scope is seen with its container id" 'echo "$out" | grep -q "\"container_id\":\"$cid\"" && echo "$out" | grep -q "\"container\":\"0123456789ab\""'
check "journal catalog: journalctl -x explains the entry" 'journalctl -q -x -u kfdbrokerd.service MESSAGE_ID=$MSG_OPENED KFDBROKER_SESSION=$sid --no-pager | grep -q "GPU session $sid opened by uid 65534"'
check "metrics file 0644 under UMask=0077, readable by nobody" 'test "$(stat -c %a /run/kfdbroker/kfdbroker.prom)" = 644 && setpriv --reuid=65534 --regid=65534 --clear-groups cat /run/kfdbroker/kfdbroker.prom | grep -q "^kfdbroker_build_info"'
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

# Reload: a good policy, then a broken one next to it, then fixed.
pid=$(systemctl show -P MainPID kfdbrokerd.service)
mkdir -p /etc/kfdbroker/policy.d
printf '[Match]\nUser=nobody\n[Limits]\nWeight=5\n' >/etc/kfdbroker/policy.d/40-good.conf
check "systemctl reload of a good policy succeeds" 'systemctl reload kfdbrokerd.service'
check "journal: POLICY_RELOADED (origin D-Bus)" 'entries $MSG_RELOADED | grep -qx "KFDBROKER_RELOAD_ORIGIN=D-Bus"'
printf '[Match]\nUser=nobody\n[Limits]\nWeight=heavy\n' >/etc/kfdbroker/policy.d/50-broken.conf
out=$(systemctl reload kfdbrokerd.service 2>&1); rc=$?
echo "    systemctl reload: rc $rc: $out"
check "systemctl reload of a broken policy fails" '[ $rc != 0 ]'
journalctl -q -u kfdbrokerd.service -o cat --no-pager | grep -F "ReloadPolicy failed" | tail -1 | sed 's/^/    journal: /'
check "... and the unit's journal says why, naming file and line" 'journalctl -q -u kfdbrokerd.service -o cat --no-pager | grep -F "kfdbrokerctl: ReloadPolicy failed: Policy not reloaded, the old policy stays: /etc/kfdbroker/policy.d/50-broken.conf:4: "'
check "journal: POLICY_RELOAD_FAILED, priority err" 'entries $MSG_RELOAD_FAILED KFDBROKER_RELOAD_ORIGIN=D-Bus | grep -qx "PRIORITY=3"'
check "the failed reload keeps the same daemon, active" '[ "$(systemctl show -P MainPID kfdbrokerd.service)" = "$pid" ] && systemctl is-active -q kfdbrokerd.service'
setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl status >/dev/null 2>&1
sleep 0.3
check "the old policy stays: a new session of nobody gets the good rule" 'last_field KFDBROKER_POLICY_RULES $MSG_OPENED KFDBROKER_UID=65534 | grep -q "/etc/kfdbroker/policy.d/40-good.conf:1$"'
rm /etc/kfdbroker/policy.d/50-broken.conf
check "systemctl reload succeeds once the file is fixed" 'systemctl reload kfdbrokerd.service'
check "SIGHUP still reloads" 'kill -HUP $pid && sleep 0.5 && entries $MSG_RELOADED | grep -qx "KFDBROKER_RELOAD_ORIGIN=SIGHUP"'

# polkit asks for a password through pkttyagent when kfdbrokerctl has a terminal.
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl --no-ask-password reload 2>&1); rc=$?
echo "    nobody --no-ask-password reload: rc $rc: $out"
check "nobody's reload without asking is refused at once: authentication required" '[ $rc = 1 ] && echo "$out" | grep -q "authentication required"'
# nobody's reload in a login session on a terminal, as after `ssh nobody@host`: runuser -l
# opens a logind session (pam_systemd), -P gives it a terminal; script(1) types PASSWORD
# when asked (thrice at most). polkit takes kfdbrokerctl's agent (pkttyagent --fallback)
# only for a subject in a session.
# Its transcript goes to /tmp/agent.txt; returns kfdbrokerctl's exit status.
agent() {
        (for _ in 1 2 3; do sleep 2; printf '%s\n' "$1"; done; sleep 3) |
                timeout 60 script -qefc "runuser -P -l nobody -s /bin/sh -c 'kfdbrokerctl reload'" /dev/null >/tmp/agent.raw 2>&1
        agent_rc=$?
        tr -d '\r' </tmp/agent.raw | grep -v "cannot change directory" >/tmp/agent.txt
        return $agent_rc
}
reloads() { entries $MSG_RELOADED KFDBROKER_RELOAD_ORIGIN=D-Bus | grep -c '^MESSAGE='; }
before=$(reloads)
agent kfdb-test-pw; rc=$?
out=$(cat /tmp/agent.txt)
echo "$out" | sed 's/^/    agent: /'
check "on a terminal pkttyagent asks for org.kfdbroker.manage" 'echo "$out" | grep -q "AUTHENTICATING FOR org.kfdbroker.manage"'
check "... and with root's password nobody's reload succeeds" '[ $rc = 0 ] && [ "$(reloads)" -gt "$before" ]'
before=$(reloads)
agent wrong-pw; rc=$?
out=$(cat /tmp/agent.txt)
echo "$out" | tail -3 | sed 's/^/    agent: /'
check "... and with a wrong one it is refused, saying so" '[ $rc = 1 ] && echo "$out" | grep -q "polkit did not authorize action org.kfdbroker.manage" && [ "$(reloads)" = "$before" ]'

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
check "journal: the old daemon said SHUTTING_DOWN" 'entries $MSG_SHUTTING_DOWN | grep -q "^KFDBROKER_SESSIONS=[1-9]"'
entries $MSG_ENDED KFDBROKER_UID=65534 | grep -E '^(MESSAGE|ERRNO|KFDBROKER_RECONNECT)=' | tail -3 | sed 's/^/    journal: /'
check "journal: the client's session ENDED by the daemon, told to reconnect (ESHUTDOWN)" 'entries $MSG_ENDED KFDBROKER_UID=65534 KFDBROKER_RECONNECT=yes | grep -qx "ERRNO=108"'
check "journal: the new daemon logged SESSION_RESUMED with the client's fence" 'entries $MSG_RESUMED KFDBROKER_UID=65534 | grep -q "^KFDBROKER_RESUME_FENCE=[1-9]"'
check "journal catalog: journalctl -x explains the resumed session" 'journalctl -q -x -u kfdbrokerd.service MESSAGE_ID=$MSG_RESUMED --no-pager | grep -q "its fences continue after"'

journalctl -q -u kfdbrokerd.service --no-pager | tail -15 | sed 's/^/    journal: /'
systemctl stop kfdbrokerd.service
check "stops cleanly" '! systemctl is-failed -q kfdbrokerd.service'
check "no worker outlives the daemon" '[ -z "$(workers)" ]'
check "the daemon was never restarted (Restart=on-failure)" '[ "$(systemctl show -P NRestarts kfdbrokerd.service)" = 0 ]'
systemctl stop kfdbrokerd.socket
check "the CDI spec goes with the socket" '! test -e /run/cdi/kfdbroker.json'
kill $peer
echo "exit $fail"
echo "runner finished"
EOF

# Boots the container with the runner script DIR/run.sh, whose output is
# DIR/out.txt; extra nspawn options follow. Prints the output.
boot() {
        local host=$1
        shift
        systemd-nspawn -q --register=no --keep-unit -D "$rootfs" --volatile=overlay \
                --bind="$host:/mnt/host" --bind-ro="$tmp/dest:/mnt/dest" "$@" -b >"$host/boot.log" 2>&1 || true
        if [[ ! -f $host/out.txt ]]; then
                echo "not ok - the container did not run $host/run.sh:"
                tail -30 "$host/boot.log"
                return
        fi
        cat "$host/out.txt"
        # A runner that died half way (sh is dash there: a bashism ends it)
        # must not pass on the checks it did reach.
        if ! grep -qx "runner finished" "$host/out.txt"; then
                echo "not ok - $host/run.sh stopped before its end:"
                tail -5 "$host/boot.log"
        fi
}

# The second boot: the files are there before the container boots (a package
# installed into an image, or the first boot after an install), bind-mounted
# read-only in their places; no GPU, not even a stand-in. The README's four
# commands, verbatim, then the documented simulator drop-in.
mkdir "$tmp/host2"
cat >"$tmp/host2/run.sh" <<'EOF'
set -u
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fi; }
NO_GPU='no AMD GPU: /dev/kfd missing — see kfdbrokerd(8) to run the simulated GPU'
echo "    (preinstalled) kfdbroker at boot: $(id kfdbroker 2>&1)"
systemd-sysusers && systemd-tmpfiles --create kfdbroker.conf
systemctl daemon-reload && systemctl enable --now kfdbrokerd.socket
check "(preinstalled) kfdbrokerd.socket is listening" 'systemctl is-active -q kfdbrokerd.socket'
check "(preinstalled) the CDI spec is in /run/cdi" 'test -s /run/cdi/kfdbroker.json'
# More connections than the unit's start limit (5 in 10 s) would allow restarts.
for i in 1 2 3 4 5 6 7; do
        out=$(setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl status 2>&1); rc=$?
done
echo "    nobody's kfdbrokerctl status without a GPU: rc $rc: $out"
check "(no GPU) kfdbrokerctl status says why: no AMD GPU, see kfdbrokerd(8)" '[ $rc = 1 ] && echo "$out" | grep -qF "$NO_GPU"'
systemctl status --no-pager kfdbrokerd.service 2>&1 | head -8 | sed 's/^/    /'
check "(no GPU) the service is up, its STATUS= says why" 'systemctl is-active -q kfdbrokerd.service && [ "$(systemctl show -P StatusText kfdbrokerd.service)" = "$NO_GPU" ]'
check "(no GPU) systemctl status shows it" 'systemctl status --no-pager kfdbrokerd.service | grep -qF "Status: \"$NO_GPU\""'
check "(no GPU) no restart loop: one daemon, never restarted" '[ "$(systemctl show -P NRestarts kfdbrokerd.service)" = 0 ]'
check "(no GPU) the socket unit stays active, never failed" 'systemctl is-active -q kfdbrokerd.socket && ! systemctl is-failed -q kfdbrokerd.socket'
out=$(busctl --system call org.kfdbroker.Broker1 /org/kfdbroker/Broker1 org.kfdbroker.Broker1 ListSessions 2>&1)
echo "    busctl ListSessions without a GPU: $out"
check "(no GPU) the name is owned by kfdbroker and its calls say why" 'busctl --system status org.kfdbroker.Broker1 | grep -Eq "^EUID=$(id -u kfdbroker)$" && echo "$out" | grep -qF "no AMD GPU: /dev/kfd missing"'
# kfdbrokerd(8)'s way to run the service on the simulated GPU.
mkdir -p /etc/systemd/system/kfdbrokerd.service.d
cat >/etc/systemd/system/kfdbrokerd.service.d/simulator.conf <<EOT
[Service]
ExecStart=
ExecStart=/usr/libexec/kfdbrokerd --device=sim --bus=system
EOT
systemctl daemon-reload && systemctl restart kfdbrokerd.service
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups kfdbrokerctl status 2>&1); rc=$?
echo "$out" | head -4 | sed 's/^/    /'
check "(simulator drop-in) kfdbrokerctl status is answered by the simulated GPU" '[ $rc = 0 ] && echo "$out" | grep -qx "backend:  sim (simulated GPU)"'
check "(simulator drop-in) STATUS= names the simulated GPU" 'systemctl show -P StatusText kfdbrokerd.service | grep -q "^Serving on the simulated GPU gfx1030"'
systemctl stop kfdbrokerd.socket kfdbrokerd.service
check "(preinstalled) the CDI spec goes with the socket" '! test -e /run/cdi/kfdbroker.json'
echo "runner finished"
EOF
binds=()
while IFS= read -r f; do
        binds+=("--bind-ro=$tmp/dest/$f:/$f")
done < <(cd "$tmp/dest" && find . \( -type f -o -type l \) -printf '%P\n')

{
        boot "$tmp/host"
        boot "$tmp/host2" "${binds[@]}"
} >"$tmp/all.txt"
cat "$tmp/all.txt"
passed=$(grep -c '^ok - ' "$tmp/all.txt" || true)
failed=$(grep -c '^not ok - ' "$tmp/all.txt" || true)
echo "$passed passed, $failed failed"
[[ $failed == 0 && $passed -gt 0 ]]

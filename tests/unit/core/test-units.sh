#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks the generated systemd units and the bus/polkit files the way systemd,
# dbus-daemon and polkit themselves read them:
#   - systemd-analyze verify passes on kfdbrokerd.service/.socket (with
#     ExecStart= pointed at the built daemon) and prints nothing;
#   - systemd-analyze security --offline=yes rates the service at most
#     $THRESHOLD tenths (and a bare unit fails that threshold, so the check
#     can fail);
#   - systemd-sysusers and systemd-tmpfiles apply our snippets to an empty root;
#   - a private dbus-daemon with the stock default-deny system policy plus ours
#     refuses org.kfdbroker.Broker1 to anyone but the policy's user, and grants
#     it to that user;
#   - the polkit actions validate against polkit's DTD; the activation file
#     names the unit;
#   - journalctl compiles the message catalog, which has an entry for every
#     MESSAGE_ID the daemon logs (daemon/util/log-ids.h) and no other.
# Usage: test-units.sh UNITS_BUILD_DIR SOURCE_ROOT KFDBROKERD THRESHOLD KFDBROKERCTL
set -u

units=$1 src=$2 daemon=$(realpath -m "$3") threshold=$4 ctl=$(realpath -m "$5")
pass=0 fail=0
tmp=$(mktemp -d /tmp/kfdb-units.XXXXXX)
bus_pid=
cleanup() {
        [[ -n $bus_pid ]] && kill "$bus_pid" 2>/dev/null
        rm -rf "$tmp"
}
trap cleanup EXIT

ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; shift; for l in "$@"; do echo "    $l"; done; fail=$((fail + 1)); }

if ! command -v systemd-analyze >/dev/null; then
        echo "systemd-analyze not installed (apt-get install systemd)"
        exit 77
fi

# --- systemd-analyze verify ---
mkdir "$tmp/units"
sed -e "s|^ExecStart=[^ ]*|ExecStart=$daemon|" -e "s|^ExecReload=+[^ ]*|ExecReload=+$ctl|" \
        "$units/kfdbrokerd.service" >"$tmp/units/kfdbrokerd.service"
sed -e "s|^ExecStartPost=-+[^ ]*|ExecStartPost=-+$ctl|" "$units/kfdbrokerd.socket" >"$tmp/units/kfdbrokerd.socket"
out=$(cd "$tmp/units" && systemd-analyze verify --man=no ./kfdbrokerd.service ./kfdbrokerd.socket 2>&1)
rc=$?
if [[ $rc == 0 && -z $out ]]; then
        ok "systemd-analyze verify kfdbrokerd.service kfdbrokerd.socket"
else
        not_ok "systemd-analyze verify (rc $rc)" "$out"
fi

# The unit as installed must name the installed daemon and nothing more: its
# settings are in the vendor kfdbrokerd.conf, which puts the service on the
# real GPU only and on the system bus (a drop-in can change them).
if grep -q "^ExecStart=/.*/kfdbrokerd$" "$units/kfdbrokerd.service"; then
        ok "ExecStart names the installed kfdbrokerd, no options"
else
        not_ok "ExecStart" "$(grep ExecStart "$units/kfdbrokerd.service")"
fi
out=$("$daemon" --config="$src/units/kfdbrokerd.conf" --show-config 2>&1)
if grep -Eq "^device=kfd +# $src/units/kfdbrokerd.conf:[0-9]+$" <<<"$out" &&
   grep -Eq "^bus=system +# $src/units/kfdbrokerd.conf:[0-9]+$" <<<"$out" &&
   [[ $(grep -c "# $src/units/kfdbrokerd.conf:" <<<"$out") == 2 ]] && ! grep -q warning <<<"$out"; then
        ok "the shipped kfdbrokerd.conf sets device=kfd and bus=system, nothing else, no warning"
else
        not_ok "kfdbrokerd --show-config of the shipped kfdbrokerd.conf" "$out"
fi
# Every key the daemon knows is in the shipped file, commented out or set.
for key in $("$daemon" --no-config --show-config | sed -n 's/^\([a-z-]*\)=.*/\1/p'); do
        if ! grep -Eq "^#?$key=" "$src/units/kfdbrokerd.conf"; then
                not_ok "the shipped kfdbrokerd.conf lacks $key="
                continue
        fi
        ok "the shipped kfdbrokerd.conf has $key="
done

# The CDI spec lives as long as the socket listens (docs/containers.md), and
# is written by the socket unit as root, not by the sandboxed daemon.
if grep -q "^ExecStartPost=-+/.*/kfdbrokerctl --socket=/run/kfdbroker/kfdbroker.sock cdi --from-sockets --output=/run/cdi/kfdbroker.json$" "$units/kfdbrokerd.socket" &&
        grep -q "^ExecStopPost=+rm -f /run/cdi/kfdbroker.json$" "$units/kfdbrokerd.socket" &&
        ! grep -q "cdi" "$units/kfdbrokerd.service"; then
        ok "kfdbrokerd.socket writes /run/cdi/kfdbroker.json once listening and removes it when stopped"
else
        not_ok "the socket unit's CDI spec" "$(grep Exec "$units/kfdbrokerd.socket")"
fi

# A reload must be able to fail: the synchronous D-Bus call, not a signal.
if grep -q "^ExecReload=+/.*/kfdbrokerctl --no-ask-password reload$" "$units/kfdbrokerd.service" &&
   ! grep -q "^ExecReload=.*kill" "$units/kfdbrokerd.service"; then
        ok "ExecReload runs kfdbrokerctl reload (privileged, synchronous), no signal"
else
        not_ok "ExecReload" "$(grep ExecReload "$units/kfdbrokerd.service")"
fi

# --- systemd-analyze security ---
out=$(systemd-analyze security --offline=yes --threshold="$threshold" "$tmp/units/kfdbrokerd.service" 2>&1)
rc=$?
score=$(grep -o 'Overall exposure level for kfdbrokerd.service: [0-9.]*' <<<"$out" | awk '{print $NF}')
echo "# systemd-analyze security --offline=yes kfdbrokerd.service: exposure $score (threshold $threshold tenths)"
if [[ $rc == 0 && -n $score ]]; then
        ok "exposure $score within threshold $threshold"
else
        not_ok "exposure ${score:-?} above threshold $threshold (rc $rc)" "$(grep '✗' <<<"$out")"
fi
printf '[Service]\nExecStart=/bin/true\n' >"$tmp/units/bare.service"
if ! systemd-analyze security --offline=yes --threshold="$threshold" "$tmp/units/bare.service" >/dev/null 2>&1; then
        ok "a bare unit fails the same threshold"
else
        not_ok "a bare unit passed threshold $threshold: the check cannot fail"
fi

# --- sysusers / tmpfiles ---
mkdir -p "$tmp/root/etc"
out=$(systemd-sysusers --root="$tmp/root" "$src/units/kfdbroker.sysusers.conf" 2>&1)
rc=$?
if [[ $rc == 0 ]] && grep -q '^kfdbroker:x:[0-9]*:[0-9]*:kfdbroker GPU broker:/:/usr/sbin/nologin$' "$tmp/root/etc/passwd" &&
        grep -q '^render:x:[0-9]*:kfdbroker$' "$tmp/root/etc/group" &&
        ! grep -q '^video:x:.*kfdbroker' "$tmp/root/etc/group"; then
        ok "systemd-sysusers creates kfdbroker in render (not video: the card nodes are not ours)"
else
        not_ok "systemd-sysusers (rc $rc)" "$out" "$(cat "$tmp/root/etc/passwd" "$tmp/root/etc/group" 2>&1)"
fi
out=$(systemd-tmpfiles --root="$tmp/root" --create "$src/units/kfdbroker.tmpfiles.conf" 2>&1)
rc=$?
if [[ $rc == 0 && -d $tmp/root/etc/kfdbroker/policy.d ]]; then
        ok "systemd-tmpfiles creates /etc/kfdbroker/policy.d"
else
        not_ok "systemd-tmpfiles (rc $rc)" "$out"
fi

# --- D-Bus activation file ---
act="$units/org.kfdbroker.Broker1.service"
if grep -qx '\[D-BUS Service\]' "$act" && grep -qx 'Name=org.kfdbroker.Broker1' "$act" &&
        grep -qx 'SystemdService=kfdbrokerd.service' "$act" && grep -qx 'User=kfdbroker' "$act" &&
        grep -qx 'BusName=org.kfdbroker.Broker1' "$units/kfdbrokerd.service"; then
        ok "activation file and BusName= agree on org.kfdbroker.Broker1 and kfdbrokerd.service"
else
        not_ok "activation file" "$(cat "$act")"
fi

# --- bus policy on a private system-like bus ---
start_bus() { # start_bus POLICYFILE
        # The old bus must be gone before the new one listens on the same path:
        # dbus-daemon unlinks its socket as it exits, which would take the new
        # bus's socket away (the rare "the policy's user could not own the name").
        if [[ -n $bus_pid ]] && kill "$bus_pid" 2>/dev/null; then
                for _ in $(seq 500); do kill -0 "$bus_pid" 2>/dev/null || break; sleep 0.01; done
        fi
        rm -rf "$tmp/bus" && mkdir -p "$tmp/bus/system.d"
        cp "$1" "$tmp/bus/system.d/org.kfdbroker.Broker1.conf"
        cat >"$tmp/bus/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$tmp/bus/socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
  </policy>
  <includedir>$tmp/bus/system.d</includedir>
</busconfig>
EOF
        bus_pid=$(dbus-daemon --config-file="$tmp/bus/bus.conf" --fork --print-pid 2>"$tmp/bus/err") || {
                bus_pid=
                return 1
        }
}
request_name() {
        busctl --address="unix:path=$tmp/bus/socket" call org.freedesktop.DBus /org/freedesktop/DBus \
                org.freedesktop.DBus RequestName su org.kfdbroker.Broker1 4 2>&1
}

if ! command -v dbus-daemon >/dev/null || ! command -v busctl >/dev/null; then
        not_ok "dbus-daemon and busctl are needed for the bus policy checks (apt-get install dbus systemd)"
elif start_bus "$src/policy/org.kfdbroker.Broker1.conf"; then
        ok "dbus-daemon accepts org.kfdbroker.Broker1.conf"
        me=$(id -un)
        out=$(request_name)
        if [[ $me != kfdbroker && $out == *"Access denied"* ]]; then
                ok "user $me may not own org.kfdbroker.Broker1"
        else
                not_ok "user $me owning org.kfdbroker.Broker1" "$out"
        fi
        sed "s/user=\"kfdbroker\"/user=\"$me\"/" "$src/policy/org.kfdbroker.Broker1.conf" >"$tmp/mine.conf"
        if start_bus "$tmp/mine.conf" && [[ $(request_name) == "u 1" ]]; then
                ok "the policy's user owns org.kfdbroker.Broker1 (primary owner)"
        else
                not_ok "the policy's user could not own the name" "$(request_name)" "$(cat "$tmp/bus/err")"
        fi
else
        not_ok "dbus-daemon refused the bus policy" "$(cat "$tmp/bus/err")"
fi

# --- XML ---
if command -v xmllint >/dev/null; then
        dtd=/usr/share/polkit-1/policyconfig-1.dtd
        if [[ -f $dtd ]]; then
                out=$(xmllint --noout --dtdvalid "$dtd" "$src/policy/org.kfdbroker.policy" 2>&1)
        else
                out=$(xmllint --noout "$src/policy/org.kfdbroker.policy" 2>&1)
        fi
        if [[ $? == 0 ]] && grep -q 'id="org.kfdbroker.manage"' "$src/policy/org.kfdbroker.policy" &&
                grep -q 'id="org.kfdbroker.read-all"' "$src/policy/org.kfdbroker.policy"; then
                ok "polkit actions org.kfdbroker.manage and org.kfdbroker.read-all are valid${dtd:+ against $dtd}"
        else
                not_ok "polkit XML" "$out"
        fi
        if out=$(xmllint --noout "$src/policy/org.kfdbroker.Broker1.conf" 2>&1); then
                ok "bus policy is well-formed XML"
        else
                not_ok "bus policy XML" "$out"
        fi
else
        not_ok "xmllint is needed (apt-get install libxml2-utils)"
fi

# --- the journal's message catalog ---
# journalctl compiles it as the systemd package's trigger would; every
# MESSAGE_ID of daemon/util/log-ids.h has an entry, and no entry is stale.
mkdir -p "$tmp/catalog-root/usr/lib/systemd/catalog"
cp "$src/units/kfdbroker.catalog" "$tmp/catalog-root/usr/lib/systemd/catalog/"
if out=$(journalctl --root="$tmp/catalog-root" --update-catalog 2>&1) && [[ -z $out ]]; then
        ok "journalctl --update-catalog reads kfdbroker.catalog without a word"
else
        not_ok "journalctl --update-catalog" "$out"
fi
listed=$(journalctl --root="$tmp/catalog-root" --list-catalog 2>&1 | awk '$2 == "kfdbroker:" { print $1 }' | sort)
ids=$(sed -n 's/^#define KFDBROKER_MESSAGE_[A-Z_]* "\([0-9a-f]\{32\}\)"$/\1/p' "$src/daemon/util/log-ids.h" | sort)
if [[ -n $ids && $listed == "$ids" ]]; then
        ok "the catalog has exactly the $(wc -w <<<"$ids") MESSAGE_IDs of log-ids.h"
else
        not_ok "catalog and log-ids.h differ" "log-ids.h: $(echo $ids)" "catalog:   $(echo $listed)"
fi

echo "$pass passed, $fail failed"
[[ $fail == 0 ]]

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# kfdbrokerd's configuration files as the program reads them, under
# --config-root= (a test root standing for /): --show-config prints every
# key with its value and FILE:LINE, "command line" or "default"; a bad value
# in a file stops the daemon with exit 1 and FILE:LINE and the key; an
# unknown key is a warning; and a daemon started from a file serves on what
# the file says.
# Usage: test-show-config.sh KFDBROKERD VENDOR_DIR (the build's $prefix/lib/kfdbroker)
set -u

daemon=$(realpath -m "$1")
vendor=${2:-/usr/lib/kfdbroker}
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; [[ $# -gt 1 ]] && sed 's/^/#   /' <<<"$2"; fail=$((fail + 1)); }
tmp=$(mktemp -d /tmp/kfdbroker-show-config.XXXXXX)
pid=
cleanup() {
        [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        rm -rf "$tmp"
}
trap cleanup EXIT

root=$tmp/root
mkdir -p "$root$vendor/kfdbrokerd.conf.d" "$root/etc/kfdbroker/kfdbrokerd.conf.d"
printf '[Daemon]\ndevice=kfd\nbus=system\n' >"$root$vendor/kfdbrokerd.conf"
printf '[Daemon]\nmax-contexts=8\nsdma-queues=3\n' >"$root$vendor/kfdbrokerd.conf.d/50-site.conf"
printf '# the administrator\n[Daemon]\nmax-contexts=12\n' >"$root/etc/kfdbroker/kfdbrokerd.conf.d/50-site.conf"
printf '[Daemon]\ngpu=0000:03:00.0\n' >"$root/etc/kfdbroker/kfdbrokerd.conf.d/60-gpu.conf"

expect_line() { # expect_line OUTPUT KEY VALUE SOURCE
        if grep -Eq "^$2=$3 +# $4\$" <<<"$1"; then
                ok "--show-config: $2=$3 from $4"
        else
                not_ok "--show-config: $2=$3 from $4" "$1"
        fi
}

out=$("$daemon" --config-root="$root" --show-config --bus=none 2>"$tmp/err")
rc=$?
[[ $rc == 0 && ! -s $tmp/err ]] && ok "--show-config exits 0, no warning" || not_ok "--show-config rc $rc" "$(cat "$tmp/err")"
expect_line "$out" device kfd "$root$vendor/kfdbrokerd.conf:2"
expect_line "$out" bus none "command line"
expect_line "$out" max-contexts 12 "$root/etc/kfdbroker/kfdbrokerd.conf.d/50-site.conf:3"
expect_line "$out" sdma-queues 2 "default"
expect_line "$out" gpu 0000:03:00.0 "$root/etc/kfdbroker/kfdbrokerd.conf.d/60-gpu.conf:2"
expect_line "$out" metrics-interval 15 "default"
[[ $(head -1 <<<"$out") == "[Daemon]" ]] && ok "--show-config starts with [Daemon]" || not_ok "--show-config header" "$out"

# --no-config: the built-in defaults, whatever the root holds.
out=$("$daemon" --no-config --show-config 2>&1)
expect_line "$out" device auto default
expect_line "$out" bus none default

# An unknown key is a warning; the rest applies.
printf '[Daemon]\nmax-context=4\n' >"$root/etc/kfdbroker/kfdbrokerd.conf.d/70-typo.conf"
out=$("$daemon" --config-root="$root" --show-config 2>"$tmp/err")
rc=$?
want="kfdbrokerd: warning: $root/etc/kfdbroker/kfdbrokerd.conf.d/70-typo.conf:2: unknown key \"max-context\" in [Daemon], ignoring it"
if [[ $rc == 0 && $(cat "$tmp/err") == "$want" ]]; then
        ok "an unknown key warns with FILE:LINE and exits 0"
else
        not_ok "unknown key (rc $rc)" "$(cat "$tmp/err")"
fi
expect_line "$out" max-contexts 12 "$root/etc/kfdbroker/kfdbrokerd.conf.d/50-site.conf:3"

# A bad value is fatal at start-up, naming FILE:LINE and the key.
printf '[Daemon]\n\nmax-fds-per-user=lots\n' >"$root/etc/kfdbroker/kfdbrokerd.conf.d/80-bad.conf"
for args in "--show-config" "--device=sim --listen=$tmp/never.sock"; do
        # shellcheck disable=SC2086
        "$daemon" --config-root="$root" $args >/dev/null 2>"$tmp/err"
        rc=$?
        want="kfdbrokerd: $root/etc/kfdbroker/kfdbrokerd.conf.d/80-bad.conf:3: max-fds-per-user=: expected a number of file descriptors (at least 1) or infinity, got 'lots'"
        if [[ $rc == 1 ]] && grep -Fxq "$want" "$tmp/err"; then
                ok "kfdbrokerd $args: a bad value exits 1 naming FILE:LINE and the key"
        else
                not_ok "kfdbrokerd $args with a bad value (rc $rc)" "$(cat "$tmp/err")"
        fi
done
rm "$root/etc/kfdbroker/kfdbrokerd.conf.d/80-bad.conf" "$root/etc/kfdbroker/kfdbrokerd.conf.d/70-typo.conf"

# The command line's bad values read as before.
"$daemon" --no-config --device=gpu >/dev/null 2>"$tmp/err"
rc=$?
[[ $rc == 1 && $(cat "$tmp/err") == "kfdbrokerd: --device: expected auto, kfd or sim, got 'gpu'" ]] &&
        ok "--device=gpu: exit 1 and the option named" || not_ok "--device=gpu (rc $rc)" "$(cat "$tmp/err")"
"$daemon" --config="$tmp/missing.conf" --show-config >/dev/null 2>"$tmp/err"
rc=$?
[[ $rc == 1 && $(cat "$tmp/err") == "kfdbrokerd: $tmp/missing.conf: cannot open: No such file or directory" ]] &&
        ok "--config= of a missing file: exit 1" || not_ok "--config=missing (rc $rc)" "$(cat "$tmp/err")"
"$daemon" --no-config --config="$tmp/x.conf" --show-config >/dev/null 2>"$tmp/err"
[[ $? == 1 ]] && grep -q "cannot be combined" "$tmp/err" && ok "--no-config with --config= refused" ||
        not_ok "--no-config --config=" "$(cat "$tmp/err")"

# A daemon started from the file alone: the simulated GPU on the file's socket.
mkdir -p "$tmp/policy"
printf '[Daemon]\ndevice=sim\nbus=none\nlisten=%s\npolicy-dir=%s\nlog-target=stderr\n' \
        "$tmp/k.sock" "$tmp/policy" >"$root/etc/kfdbroker/kfdbrokerd.conf.d/90-run.conf"
"$daemon" --config-root="$root" 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do
        [[ -S $tmp/k.sock ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
done
if [[ -S $tmp/k.sock ]] && grep -q "Device 0: sim " "$tmp/log"; then
        ok "kfdbrokerd --config-root= serves the simulated GPU on the file's listen= socket"
else
        not_ok "kfdbrokerd from the file did not listen on $tmp/k.sock" "$(cat "$tmp/log")"
fi
kill "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
[[ $rc == 0 ]] && ok "it stops with 0 on SIGTERM" || not_ok "exit status $rc on SIGTERM" "$(cat "$tmp/log")"

echo "# $pass passed, $fail failed"
[[ $fail == 0 ]]

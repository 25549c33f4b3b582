# SPDX-License-Identifier: MIT
#
# What the shell tests that run a kfdbrokerd of their own share (test-hip.sh,
# test-rocm-libs.sh, test-rocminfo.sh): TAP-like results, a private
# directory, and the daemon on the simulated GPU on a private socket with a
# policy directory of the test's. Sourced; the test sets $daemon (the
# kfdbrokerd to run) first, then calls daemon_test_init NAME.
#   ok TEXT / not_ok TEXT   one result
#   finish [RC]             prints the counts; exit 1 on a failure, else RC (0)
#   $tmp                    the private directory (mode 755), with policy/;
#                           removed at exit, after the daemon is stopped
#   start [ARGS...]         (re)starts the daemon (--no-config --device=sim
#                           --listen=$tmp/sock --policy-dir=$tmp/policy ARGS),
#                           log in $tmp/daemon.log; 1 if it did not come up
#   stop                    stops it and waits for it

pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
finish() {
        echo "$pass passed, $fail failed"
        [[ $fail == 0 ]] || exit 1
        exit "${1:-0}"
}

dpid=
stop() {
        if [[ -n $dpid ]]; then
                kill "$dpid" 2>/dev/null
                wait "$dpid" 2>/dev/null
        fi
        dpid=
}

start() {
        stop
        rm -f "$tmp/sock"
        "$daemon" --no-config --device=sim --listen="$tmp/sock" --policy-dir="$tmp/policy" "$@" \
                >"$tmp/daemon.log" 2>&1 &
        dpid=$!
        for _ in $(seq 200); do
                [[ -S $tmp/sock ]] && return 0
                sleep 0.05
        done
        not_ok "kfdbrokerd did not come up: $(cat "$tmp/daemon.log")"
        return 1
}

daemon_test_init() { # daemon_test_init NAME
        tmp=$(mktemp -d "/tmp/kfdbroker-$1.XXXXXX")
        chmod 755 "$tmp"
        mkdir "$tmp/policy"
        trap 'stop; rm -rf "$tmp"' EXIT
}

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `kfdbrokerctl policy check [DIR...]`, as `systemd-analyze verify` answers:
# exit 0 with nothing on stderr for a good policy, 0 with each warning as
# "FILE:LINE: message" (an unknown user or group), 1 with "FILE:LINE:
# message" for a policy a reload would refuse, 2 for a usage error; the
# shipped policy.d and the example check clean.
# Usage: test-policy-check.sh KFDBROKERCTL SOURCE_ROOT
set -u

ctl=$1 src=$2
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; [[ $# -gt 1 ]] && sed 's/^/#   /' <<<"$2"; fail=$((fail + 1)); }
tmp=$(mktemp -d /tmp/kfdbroker-policy-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME WANT_RC WANT_STDOUT WANT_STDERR ARGS...
        local name=$1 want_rc=$2 want_out=$3 want_err=$4 out err rc
        shift 4
        out=$("$ctl" policy "$@" 2>"$tmp/err")
        rc=$?
        err=$(cat "$tmp/err")
        if [[ $rc == "$want_rc" && $out == "$want_out" && $err == "$want_err" ]]; then
                ok "$name"
        else
                not_ok "$name" "rc $rc (want $want_rc)"$'\n'"stdout: $out"$'\n'"stderr: $err"
        fi
}

out=$("$ctl" policy check "$src/policy/policy.d" "$src/policy/examples" 2>"$tmp/err")
rc=$?
if [[ $rc == 0 && ! -s $tmp/err && $out =~ ^"kfdbrokerctl policy check: "[1-9][0-9]*" rules from 2 files, 0 warnings"$ ]]; then
        ok "the shipped policy.d and example: 0, no warning"
else
        not_ok "the shipped policy.d and example" "rc $rc, $out, $(cat "$tmp/err")"
fi

mkdir "$tmp/warn"
printf '[Limits]\nWeight=2\n\n[Match]\nUser=no-such-user-kfdb\n[Limits]\nWeight=3\n' >"$tmp/warn/50-a.conf"
printf '[Match]\nGroup=no-such-group-kfdb\n[Limits]\nWeight=4\n' >"$tmp/warn/60-b.conf"
check "unknown user and group: 0, each a FILE:LINE warning" 0 \
        "kfdbrokerctl policy check: 3 rules from 2 files, 2 warnings" \
        "$tmp/warn/50-a.conf:5: User=no-such-user-kfdb: no such user; this rule matches no one
$tmp/warn/60-b.conf:2: Group=no-such-group-kfdb: no such group; this rule matches no one" \
        check "$tmp/warn"

mkdir "$tmp/bad"
printf '[Limits]\nBufferMemory=2G\n[Limits]\nWieght=2\n' >"$tmp/bad/50-typo.conf"
check "a typo: 1, FILE:LINE and the key" 1 \
        "kfdbrokerctl policy check: the policy would be refused; a reload keeps the old one" \
        "$tmp/bad/50-typo.conf:4: unknown key \"Wieght\" in [Limits] (value \"2\")" \
        check "$tmp/warn" "$tmp/bad"

# The first directory's file hides the same name in the next, as in the daemon.
printf '[Limits]\nWeight=5\n' >"$tmp/warn/50-typo.conf"
check "a file of the first directory masks the broken one" 0 \
        "kfdbrokerctl policy check: 4 rules from 3 files, 2 warnings" \
        "$tmp/warn/50-a.conf:5: User=no-such-user-kfdb: no such user; this rule matches no one
$tmp/warn/60-b.conf:2: Group=no-such-group-kfdb: no such group; this rule matches no one" \
        check "$tmp/warn" "$tmp/bad"

check "a missing directory: 1" 1 "" "$tmp/none: No such file or directory" check "$tmp/none"
check "no sub-command: 2" 2 "" "kfdbrokerctl policy: expected 'check [DIR...]'"
check "an unknown sub-command: 2" 2 "" "kfdbrokerctl policy: expected 'check [DIR...]', got 'verify'" verify
check "an unknown option: 2" 2 "" "kfdbrokerctl policy check: unknown option '--strict'" check --strict

echo "# $pass passed, $fail failed"
[[ $fail == 0 ]]

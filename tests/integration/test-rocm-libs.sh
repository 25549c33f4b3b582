#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Debian 12's prebuilt ROCm libraries — what a ROCm user runs first, with
# AMD's own gfx1030 kernels, not ours — through the broker (docs/rocm.md),
# against kfdbrokerd on the simulated GPU on a private socket:
#  - hip-sparse (tests/hip/): rocSPARSE's csrmv with and without analysis,
#    single and double precision, hipSPARSE's csrmv and generic SpMV, each
#    against the CPU's SpMV, csrmm against the CPU's product, csr2csc
#    against the CPU's transpose, csrsv against forward substitution;
#  - with KFDBROKER_TEST_ROCRAND=1 (minutes of interpreter time) hip-rand:
#    rocRAND's generators (range, mean, variance, histogram, the same seed
#    twice), Sobol32's first dimension exactly, Poisson, double and
#    log-normal numbers, hipRAND's normal numbers;
#  - hip-sparse in both context mechanisms (secondary KFD contexts, and
#    worker processes under --sim-kfd-version=1.18);
#  - their dispatches ran as the daemon's jobs, none failed, and the daemon
#    logged no instruction its interpreter lacks.
# Each program skips (the others still count) where its libraries were not
# installed when the build was configured; all skipped is exit 77.
# Usage: test-rocm-libs.sh KFDBROKERD KFDBROKER_RUN KFDBROKERCTL HIP_DIR
set -u

daemon=$1 run=$2 ctl=$3 hipdir=$4
# shellcheck source=daemon-lib.sh
source "$(dirname "$0")/daemon-lib.sh"
ran=0

daemon_test_init rocm-libs
# A kernel meeting an instruction the interpreter lacks stops its queue and
# completes never (docs/simulator.md): the timeout ends it, and the program
# fails, instead of hanging until the test's own timeout. XORWOW's seeding,
# the longest dispatch here, takes about 30 s on the simulator (the limit
# leaves room for a busy machine).
printf '[Limits]\nDispatchTimeout=240s\n' >"$tmp/policy/50-rocm-libs.conf"
jobs_line() { # the daemon's "jobs:" status line
        "$ctl" --socket "$tmp/sock" status 2>&1 | sed -n 's/^jobs: *//p'
}

program() { # program WHAT NAME PACKAGES: runs tests/hip/NAME through kfdbroker-run
        local what=$1 name=$2 packages=$3
        if [[ ! -x $hipdir/$name ]]; then
                echo "SKIP (part): $name was not built (apt-get install hipcc libamdhip64-dev $packages, then reconfigure)"
                return
        fi
        ran=$((ran + 1))
        timeout 500 "$run" --socket "$tmp/sock" "$hipdir/$name" >"$tmp/out" 2>&1
        local rc=$?
        if [[ $rc == 0 ]] && grep -q '^PASS: 0 of' "$tmp/out"; then
                ok "$what: $name passes ($(grep -c '^ok' "$tmp/out") checks)"
        else
                not_ok "$what: $name exited $rc: $(grep -v '^ok' "$tmp/out" | tail -8)"
        fi
        local jobs
        jobs=$(jobs_line)
        if [[ $jobs =~ ^([0-9]+)\ completed,\ 0\ failed ]] && ((BASH_REMATCH[1] >= 10)); then
                ok "$what: $name's dispatches ran as the daemon's jobs ($jobs)"
        else
                not_ok "$what: $name's jobs: ${jobs:-none}"
        fi
        # The interpreter names an instruction it lacks when a kernel meets one.
        if grep -Ei 'unsupported|unknown (instruction|opcode)|not implemented|illegal instruction' "$tmp/daemon.log" >"$tmp/lacks"; then
                not_ok "$what: the simulator met an instruction it lacks: $(head -3 "$tmp/lacks")"
        else
                ok "$what: the daemon logged no instruction its interpreter lacks"
        fi
}

sparse_pkgs="librocsparse-dev libhipsparse-dev"
rand_pkgs="librocrand-dev libhiprand-dev"

start || finish
program "secondary contexts" hip-sparse "$sparse_pkgs"
# hip-rand spends minutes of the interpreter's time (rocRAND's generators
# and distributions over 2^18 numbers; more on a busy machine): run only when
# asked for, KFDBROKER_TEST_ROCRAND=1, so that the default suite stays short.
if [[ ${KFDBROKER_TEST_ROCRAND:-0} == 1 ]]; then
        start || finish
        program "secondary contexts" hip-rand "$rand_pkgs"
else
        echo "SKIP (part): hip-rand (rocRAND, hipRAND) runs only with KFDBROKER_TEST_ROCRAND=1: minutes of interpreter time"
fi
# A relayed program's KFD process lives in the daemon with either mechanism:
# hip-sparse runs once more with worker processes (HIP_RAND_XORWOW=1 adds
# rocRAND's XORWOW to hip-rand, half a minute of seeding).
start --sim-kfd-version=1.18 || finish
program "worker processes (KFD 1.18)" hip-sparse "$sparse_pkgs"
stop

if [[ $ran == 0 ]]; then
        echo "SKIP: no ROCm library program was built (apt-get install hipcc libamdhip64-dev $sparse_pkgs $rand_pkgs, then reconfigure)"
        finish 77
fi
finish

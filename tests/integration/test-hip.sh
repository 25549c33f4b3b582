#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Unmodified HIP programs (Debian 12's ROCm 5.2.3, built with hipcc from
# tests/hip/) through the broker (docs/rocm.md), against kfdbrokerd on the
# simulated GPU on a private socket:
#  - hip-checks (memcpy both ways, pageable and hipHostMalloc, memset,
#    shared memory, atomics, two streams with an event, D2D, elapsed time)
#    passes on the host; with SDMA off; with interrupts off; with worker
#    processes, on KFD 1.18 and on KFD 1.11 (Linux 6.1); as nobody in
#    bubblewrap with no /dev/kfd, /dev/dri or KFD sysfs; and its dispatches
#    show as GPU time of its session;
#  - with interrupts off, kernels launched after an idle period run;
#  - on two GPUs (hip-gpus) a program sees both and runs on device 1, which
#    the daemon counts as GPU 1's work, with secondary contexts and with
#    worker processes (KFD 1.18); one GPU with Devices=1 (both mechanisms);
#  - a kernel writing a wild address gets ROCr's memory-fault report in that
#    process only, while two other HIP programs pass beside it;
#  - a hipMalloc over BufferMemory= is hipErrorOutOfMemory and the program
#    goes on;
#  - an endless kernel is ended by DispatchTimeout= with an error in the
#    program (interrupts on and off);
#  - SIGKILL of a HIP program mid-kernel leaves the daemon nothing of it;
#  - when the daemon goes, a running HIP program fails with an error instead
#    of hanging, and a new one works as soon as the daemon is back.
# Skips (exit 77) only where hipcc could not build the programs or bwrap
# cannot make a sandbox here (the cases before it still count).
# Usage: test-hip.sh KFDBROKERD KFDBROKER_RUN KFDBROKERCTL HIP_DIR
set -u

daemon=$1 run=$2 ctl=$3 hipdir=$4
# shellcheck source=daemon-lib.sh
source "$(dirname "$0")/daemon-lib.sh"

if [[ ! -x $hipdir/hip-checks ]]; then
        echo "SKIP: the HIP test programs were not built (apt-get install hipcc libamdhip64-dev, then reconfigure)"
        exit 77
fi

daemon_test_init hip

policy() { # policy TEXT: the one policy file ("" for none), then reload
        rm -f "$tmp/policy/"*.conf
        [[ -n $1 ]] && printf '[Limits]\n%s\n' "$1" >"$tmp/policy/50-hip.conf"
        return 0
}

hip() { # hip OUT PROGRAM [ARGS...]: through kfdbroker-run, at most 120 s
        local out=$1
        shift
        timeout 120 "$run" --socket "$tmp/sock" "$@" >"$out" 2>&1
}

checks() { # checks WHAT [ENV=VALUE...]
        local what=$1
        shift
        env "$@" timeout 120 "$run" --socket "$tmp/sock" "$hipdir/hip-checks" >"$tmp/out" 2>&1
        local rc=$?
        if [[ $rc == 0 ]] && grep -q '^PASS: 0 of' "$tmp/out"; then
                ok "$what: hip-checks passes ($(grep -c '^ok' "$tmp/out") checks)"
        else
                not_ok "$what: hip-checks exited $rc: $(grep -v '^ok' "$tmp/out" | tail -8)"
        fi
}

start || finish
checks "host"
checks "SDMA off" HSA_ENABLE_SDMA=0
checks "interrupts off" HSA_ENABLE_INTERRUPT=0
# Work after an idle period, interrupts off: ROCr makes no KFD call between
# its doorbell store and the end of its wait, so only the relay's own look
# (kfd-relay-queue.c poll_arm()) can find the packets.
HSA_ENABLE_INTERRUPT=0 hip "$tmp/idle" "$hipdir/hip-bench" idle 2
rc=$?
if [[ $rc == 0 ]] && grep -q '^done$' "$tmp/idle"; then
        ok "interrupts off: kernels launched after 2 s idle run"
else
        not_ok "interrupts off, launch after idle: exit $rc: $(tail -3 "$tmp/idle")"
fi
"$ctl" --socket "$tmp/sock" status >"$tmp/status" 2>&1
n=$(sed -n 's/^jobs: *\([0-9]*\) completed.*/\1/p' "$tmp/status")
if [[ ${n:-0} -ge 30 ]]; then
        ok "the programs' packets ran as the daemon's jobs ($n completed)"
else
        not_ok "the daemon ran ${n:-no} jobs: $(cat "$tmp/status")"
fi

# A fault in one program, two others beside it.
"$run" --socket "$tmp/sock" "$hipdir/hip-checks" >"$tmp/b1" 2>&1 &
b1=$!
"$run" --socket "$tmp/sock" "$hipdir/hip-checks" >"$tmp/b2" 2>&1 &
b2=$!
hip "$tmp/fault" "$hipdir/hip-fault"
rc=$?
wait $b1
r1=$?
wait $b2
r2=$?
if [[ $rc != 0 ]] && grep -q 'Memory access fault by GPU node-1 .* on address 0x10000000000' "$tmp/fault"; then
        ok "a wild write gets ROCr's memory-fault report (exit $rc)"
else
        not_ok "the faulting program exited $rc: $(tail -5 "$tmp/fault")"
fi
if [[ $r1 == 0 && $r2 == 0 ]]; then
        ok "two HIP programs beside it pass"
else
        not_ok "beside the fault: exit $r1 and $r2: $(grep -v '^ok' "$tmp/b1" "$tmp/b2" | tail -6)"
fi

start --sim-kfd-version=1.18 || finish
checks "worker processes (KFD 1.18)"
# Debian 12's own kernel (6.1) speaks KFD 1.11: no dma-buf export, so the
# program's buffers are made on the render node, and the memory HIP pins
# moves onto a GTT buffer (a foreign dma-buf cannot be imported there).
start --sim-kfd-version=1.11 || finish
checks "worker processes on KFD 1.11 (Linux 6.1)"
checks "KFD 1.11, SDMA off" HSA_ENABLE_SDMA=0
# Before 1.15 KFD imports no other driver's dma-buf: the memory HIP pins
# moves onto a GTT buffer there too (the buffers themselves export).
start --sim-kfd-version=1.14 || finish
checks "worker processes on KFD 1.14"

# Two GPUs (hip-gpus COUNT DEVICE): the program sees both and runs a kernel
# and copies on device 1, which is GPU 1's work in the daemon's accounting;
# confined to GPU 1 (Devices=1) it sees that one alone, as device 0. The
# same with worker processes (KFD 1.18): the proxy worker's KFD process has
# a render file of each GPU, the daemon's context on GPU 1 lives in it.
gpus() { # gpus WHAT COUNT DEVICE
        hip "$tmp/gpus" "$hipdir/hip-gpus" "$2" "$3"
        local rc=$?
        if [[ $rc == 0 ]] && grep -q '^PASS: 0 of' "$tmp/gpus"; then
                ok "$1: hip-gpus sees $2 GPU(s) and runs on device $3"
        else
                not_ok "$1: hip-gpus $2 $3 exited $rc: $(grep -v '^ok' "$tmp/gpus" | tail -6)"
        fi
}
gpu_jobs() { # gpu_jobs N: jobs GPU N completed, as kfdbrokerctl status says
        "$ctl" --socket "$tmp/sock" status >"$tmp/status" 2>&1
        sed -n "s/^gpu $1: .* \([0-9]*\) jobs completed.*/\1/p" "$tmp/status"
}
on_gpu1() { # on_gpu1 WHAT: device 1's work was GPU 1's, none GPU 0's
        local j0 j1
        j0=$(gpu_jobs 0) j1=$(gpu_jobs 1)
        if [[ ${j1:-0} -gt 0 ]] && [[ ${j0:-1} == 0 ]]; then
                ok "$1: device 1's work ran on GPU 1 ($j1 jobs), none on GPU 0"
        else
                not_ok "$1: device 1's work should be GPU 1's: GPU 0 ${j0:-?} jobs, GPU 1 ${j1:-?}: $(cat "$tmp/status")"
        fi
}
start --sim-gpus=2 || finish
gpus "two GPUs" 2 1
on_gpu1 "two GPUs"
gpus "two GPUs" 2 0
policy "Devices=1"
start --sim-gpus=2 || finish
gpus "Devices=1" 1 0
# kfdbrokerctl is confined the same way: it is shown GPU 1 (node 2) alone.
"$ctl" --socket "$tmp/sock" status >"$tmp/status" 2>&1
n=$(sed -n 's/^jobs: *\([0-9]*\) completed.*/\1/p' "$tmp/status")
if grep -q '^gpu: *node 2 (gfx1030' "$tmp/status" && [[ ${n:-0} -gt 0 ]]; then
        ok "Devices=1: its device 0 is GPU 1 ($n jobs there)"
else
        not_ok "Devices=1: the work should be GPU 1's: $(cat "$tmp/status")"
fi
start --sim-gpus=2 --sim-kfd-version=1.18 || finish
gpus "Devices=1, worker processes (KFD 1.18)" 1 0
policy ""
start --sim-gpus=2 --sim-kfd-version=1.18 || finish
gpus "two GPUs, worker processes (KFD 1.18)" 2 1
on_gpu1 "two GPUs, worker processes (KFD 1.18)"

# Over the memory limit.
policy "BufferMemory=256M"
start || finish
hip "$tmp/quota" "$hipdir/hip-quota" 512
rc=$?
if [[ $rc == 0 ]] && grep -q 'big hipMalloc: hipErrorOutOfMemory' "$tmp/quota" &&
   grep -q 'KFD allocation refused: buffer memory limit .*policy BufferMemory=' "$tmp/daemon.log"; then
        ok "over BufferMemory=: hipErrorOutOfMemory, the program goes on, the log names the limit"
else
        not_ok "over BufferMemory=: exit $rc: $(tail -3 "$tmp/quota")"
fi

# An endless kernel, interrupts on and off.
policy "DispatchTimeout=2s"
start || finish
for mode in on off; do
        t0=$(date +%s)
        if [[ $mode == on ]]; then
                hip "$tmp/endless" "$hipdir/hip-endless"
        else
                HSA_ENABLE_INTERRUPT=0 hip "$tmp/endless" "$hipdir/hip-endless"
        fi
        rc=$?
        t=$(($(date +%s) - t0))
        if [[ $rc != 0 && $rc != 124 ]] && grep -q 'HSA_STATUS_ERROR_EXCEPTION' "$tmp/endless"; then
                ok "interrupts $mode: an endless kernel ends by DispatchTimeout= with an error ($t s, exit $rc)"
        else
                not_ok "interrupts $mode: hip-endless exited $rc after $t s: $(tail -3 "$tmp/endless")"
        fi
done
if grep -q 'ran longer than its timeout of 2.000 s' "$tmp/daemon.log"; then
        ok "the log says which timeout ended it"
else
        not_ok "no timeout in the log: $(tail -5 "$tmp/daemon.log")"
fi

# SIGKILL mid-kernel: nothing of it stays.
policy ""
start || finish
"$run" --socket "$tmp/sock" "$hipdir/hip-endless" >"$tmp/killed" 2>&1 &
victim=$!
for _ in $(seq 400); do
        grep -q '^launched' "$tmp/killed" && break
        sleep 0.05
done
sleep 0.5
# The HIP program itself (kfdbroker-run's child).
kill -KILL "$(pgrep -P $victim)"
wait $victim 2>/dev/null
for _ in $(seq 200); do
        "$ctl" --socket "$tmp/sock" status >"$tmp/status" 2>&1
        grep -q '^sessions: 1$' "$tmp/status" && grep -q ' 0 of at most .* client contexts up' "$tmp/status" && break
        sleep 0.05
done
if grep -q '^launched' "$tmp/killed" && grep -q 'Session 1 closed' "$tmp/daemon.log" &&
   grep -q '^sessions: 1$' "$tmp/status" && grep -q ' 0 of at most .* client contexts up' "$tmp/status" &&
   grep -q '^buffers: *0 B' "$tmp/status"; then
        ok "SIGKILL mid-kernel: its session, GPU context and memory are gone"
else
        not_ok "after SIGKILL: $(tail -3 "$tmp/killed"); status: $(cat "$tmp/status")"
fi
checks "after the SIGKILL"

# kfdbroker-run killed outright: its program goes with it.
"$run" --socket "$tmp/sock" "$hipdir/hip-endless" >"$tmp/wrapped" 2>&1 &
wrapper=$!
for _ in $(seq 400); do
        grep -q '^launched' "$tmp/wrapped" && break
        sleep 0.05
done
prog=$(pgrep -P $wrapper)
kill -KILL $wrapper
wait $wrapper 2>/dev/null
gone=
for _ in $(seq 200); do
        if [[ -n $prog ]] && ! kill -0 "$prog" 2>/dev/null; then
                gone=1
                break
        fi
        sleep 0.05
done
if [[ -n $gone ]]; then
        ok "SIGKILL of kfdbroker-run takes its program with it"
else
        [[ -n $prog ]] && kill -KILL "$prog"
        not_ok "kfdbroker-run killed: its program ${prog:-?} still runs"
fi

# The daemon goes while a program runs — killed outright, as in a crash (a
# SIGTERM ends the program's jobs first, which ROCr learns of as queue
# errors from the daemon itself); a new one works once it is back.
"$run" --socket "$tmp/sock" "$hipdir/hip-endless" >"$tmp/orphan" 2>&1 &
orphan=$!
for _ in $(seq 400); do
        grep -q '^launched' "$tmp/orphan" && break
        sleep 0.05
done
sleep 0.5
kill -KILL "$dpid"
wait "$dpid" 2>/dev/null
dpid=
rc=
for _ in $(seq 600); do
        if ! kill -0 $orphan 2>/dev/null; then
                wait $orphan
                rc=$?
                break
        fi
        sleep 0.05
done
if [[ -n $rc && $rc != 0 ]] && grep -q 'connection to kfdbrokerd was lost' "$tmp/orphan"; then
        ok "the daemon went: the running program fails with an error (exit $rc), no hang"
else
        kill -KILL $orphan 2>/dev/null
        if [[ -n $rc ]]; then
                not_ok "the daemon went: the program exited $rc: $(tail -3 "$tmp/orphan")"
        else
                not_ok "the daemon went: the program still runs after 30 s: $(tail -3 "$tmp/orphan")"
        fi
fi
start || finish
checks "the daemon back"

# As nobody in bubblewrap, with nothing of the GPU but the socket.
if ! command -v bwrap >/dev/null; then
        echo "SKIP: bwrap is not installed (apt-get install bubblewrap); the sandbox case was not run"
        finish 77
fi
mkdir "$tmp/bin"
cp "$run" "$(dirname "$run")/libkfdbroker-kfd.so" "$hipdir/hip-checks" "$tmp/bin/"
chmod -R a+rX "$tmp/bin"
bw=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64
    --symlink usr/bin /bin --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp
    --ro-bind /sys/devices/system /sys/devices/system --bind "$tmp/sock" /run/kfdbroker.sock
    --ro-bind "$tmp/bin" /opt/kfdbroker)
as_nobody=()
if [[ $(id -u) == 0 ]]; then
        as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if ! "${as_nobody[@]}" "${bw[@]}" true 2>"$tmp/bwrap.err"; then
        echo "SKIP: bwrap cannot make a sandbox here: $(cat "$tmp/bwrap.err")"
        finish 77
fi
"${as_nobody[@]}" "${bw[@]}" timeout 120 /opt/kfdbroker/kfdbroker-run --socket /run/kfdbroker.sock \
        /opt/kfdbroker/hip-checks >"$tmp/out" 2>&1
rc=$?
if [[ $rc == 0 ]] && grep -q '^PASS: 0 of' "$tmp/out"; then
        ok "as nobody in bubblewrap with no /dev/kfd, /dev/dri or KFD sysfs: hip-checks passes"
else
        not_ok "in bubblewrap: exit $rc: $(grep -v '^ok' "$tmp/out" | tail -8)"
fi
finish

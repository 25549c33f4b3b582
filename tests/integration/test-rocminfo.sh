#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Debian 12's unmodified rocminfo through the broker (docs/rocm.md): a
# kfdbrokerd on the simulated GPU on a private socket, `kfdbroker-run
# --socket S rocminfo` must exit 0 and list the gfx1030 agent — on the host,
# and as nobody inside bubblewrap with no /dev/kfd, no /dev/dri and no KFD
# sysfs; with worker processes (--sim-kfd-version=1.18, and 1.11: Linux 6.1,
# no dma-buf export) too; seeing only the daemon's GPU beside an iGPU, and
# every GPU the session may use on two (Devices=, GPU 1's socket and
# KFDBROKER_GPU=1 confining it to one; worker processes showing both too); and with
# --contexts=shared it must fail, saying why. Skips (exit 77) only where
# rocminfo or bwrap cannot be had, or bwrap cannot make a sandbox here.
# Also kfd-fork-probe (kfd-fork-probe.c): /dev/kfd around fork through the
# preloaded interposer; and libdrm-probe (libdrm-probe.c): libdrm_amdgpu's
# amdgpu_device_initialize() on the render node, as ROCr 5.7 and later call
# it, in both context mechanisms.
# Usage: test-rocminfo.sh KFDBROKERD KFDBROKER_RUN KFD_FORK_PROBE LIBDRM_PROBE
set -u

daemon=$1 run=$2 probe=$3 drm_probe=$4
# shellcheck source=daemon-lib.sh
source "$(dirname "$0")/daemon-lib.sh"
daemon_test_init rocminfo

check_output() { # check_output WHAT RC OUTFILE
        local what=$1 rc=$2 out=$3
        if [[ $rc == 0 ]] && grep -Eq '^ +Name: +gfx1030 *$' "$out" && grep -q '^\*\*\* Done \*\*\*' "$out"; then
                ok "$what: rocminfo exits 0 and lists the gfx1030 agent"
        else
                not_ok "$what: rocminfo exited $rc; output: $(tail -5 "$out")"
        fi
}

check_libdrm() { # check_libdrm WHAT
        if "$run" --socket "$tmp/sock" "$drm_probe" >"$tmp/drm.out" 2>"$tmp/drm.err" &&
                grep -q '^marketing name: AMD Radeon RX 6800 XT$' "$tmp/drm.out" &&
                grep -q '^family: 143$' "$tmp/drm.out" && grep -q '^counter frequency: 100000 kHz$' "$tmp/drm.out"; then
                ok "$1: libdrm's amdgpu_device_initialize() on the render node names the GPU"
        else
                not_ok "$1: libdrm-probe: $(cat "$tmp/drm.out" "$tmp/drm.err")"
        fi
}

start || exit 1
check_libdrm "secondary contexts"
if "$run" --socket "$tmp/sock" "$probe" 2>"$tmp/err"; then
        ok "two opens of /dev/kfd are one KFD process; a forked child gets EBADF on it and a KFD process of its own"
else
        not_ok "kfd-fork-probe: $(cat "$tmp/err")"
fi
if ! command -v rocminfo >/dev/null; then
        echo "SKIP: rocminfo is not installed (apt-get install rocminfo); only kfd-fork-probe was run"
        echo "$pass passed, $fail failed"
        [[ $fail == 0 ]] || exit 1
        exit 77
fi
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "host" $? "$tmp/out"
if grep -Eq '^ +Marketing Name: +AMD Radeon RX 6800 XT *$' "$tmp/out" && ! grep -q amdgpu_get_auth "$tmp/err"; then
        ok "rocminfo's thunk gets the GPU's marketing name through libdrm"
else
        not_ok "rocminfo should show the marketing name: $(grep 'Marketing Name' "$tmp/out"); stderr: $(cat "$tmp/err")"
fi
if grep -q 'opened a KFD process of its own' "$tmp/daemon.log"; then
        ok "the daemon gave rocminfo a KFD process of its own"
else
        not_ok "the daemon's log does not show the KFD relay: $(cat "$tmp/daemon.log")"
fi
if grep -q 'GPU cache info missing\|Assertion' "$tmp/err"; then
        not_ok "ROCr complained: $(cat "$tmp/err")"
else
        ok "ROCr found the GPU's caches in the topology"
fi

start --sim-kfd-version=1.18 || exit 1
check_libdrm "worker processes (KFD 1.18)"
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "worker processes (KFD 1.18)" $? "$tmp/out"
# Debian 12's own kernel (6.1) speaks KFD 1.11: no dma-buf export, the
# program's buffers made on the render node (context-kfd-process.c).
start --sim-kfd-version=1.11 || exit 1
check_libdrm "worker processes on KFD 1.11"
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "worker processes on KFD 1.11 (Linux 6.1)" $? "$tmp/out"

# Two GPUs, the daemon's the second: the process sees that one alone.
start --sim-topology=igpu-first || exit 1
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "an iGPU listed first" $? "$tmp/out"
if grep -q gfx1036 "$tmp/out"; then
        not_ok "rocminfo sees the iGPU the session may not use"
else
        ok "rocminfo sees only the daemon's GPU"
fi

# Two GPUs: a program is shown every GPU its session may use, in the
# daemon's order (hipGetDeviceCount() counts them); GPU 1 alone through
# KFDBROKER_GPU or GPU 1's socket (as a container given kfdbroker.org/gpu=1),
# or with Devices=1.
start --sim-gpus=2 || exit 1
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "two GPUs" $? "$tmp/out"
uuids=$(grep -Eo 'Uuid: *GPU-[0-9a-f]+' "$tmp/out" | awk '{ print $2 }' | tr '\n' ' ')
if [[ $(grep -Ec '^ +Name: +gfx1030 *$' "$tmp/out") == 2 ]] && [[ $uuids == "GPU-5a1e0000cafe0001 GPU-5a1e0000cafe0002 " ]]; then
        ok "rocminfo sees both GPUs the session may use, GPU 0 first"
else
        not_ok "rocminfo should see GPU 0 and GPU 1: $(grep -E 'Name:|Uuid:' "$tmp/out")"
fi
KFDBROKER_GPU=1 "$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "GPU 1 of two (KFDBROKER_GPU=1)" $? "$tmp/out"
if [[ $(grep -Ec '^ +Name: +gfx1030 *$' "$tmp/out") == 1 ]] && grep -q 'Uuid: *GPU-5a1e0000cafe0002' "$tmp/out"; then
        ok "rocminfo on GPU 1 sees one GPU, GPU 1"
else
        not_ok "rocminfo on GPU 1 should see GPU 1 alone: $(grep -E 'Name:|Uuid:' "$tmp/out")"
fi
"$run" --socket "$tmp/sock-gpu1" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "GPU 1's socket" $? "$tmp/out"
grep -q 'Uuid: *GPU-5a1e0000cafe0002' "$tmp/out" && ok "through GPU 1's socket rocminfo sees GPU 1" ||
        not_ok "through GPU 1's socket rocminfo should see GPU 1: $(grep -E 'Uuid:' "$tmp/out")"

printf '[Limits]\nDevices=1\n' >"$tmp/policy/50-gpu1.conf"
start --sim-gpus=2 || exit 1
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "Devices=1" $? "$tmp/out"
if [[ $(grep -Ec '^ +Name: +gfx1030 *$' "$tmp/out") == 1 ]] && grep -q 'Uuid: *GPU-5a1e0000cafe0002' "$tmp/out"; then
        ok "with Devices=1 rocminfo sees GPU 1 alone"
else
        not_ok "with Devices=1 rocminfo should see GPU 1 alone: $(grep -E 'Name:|Uuid:' "$tmp/out")"
fi
rm "$tmp/policy/50-gpu1.conf"
# Worker processes (KFD before 1.19) show the same: the proxy worker's KFD
# process has a render file of each GPU.
start --sim-gpus=2 --sim-kfd-version=1.18 || exit 1
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
check_output "two GPUs, worker processes" $? "$tmp/out"
uuids=$(grep -Eo 'Uuid: *GPU-[0-9a-f]+' "$tmp/out" | awk '{ print $2 }' | tr '\n' ' ')
if [[ $(grep -Ec '^ +Name: +gfx1030 *$' "$tmp/out") == 2 ]] && [[ $uuids == "GPU-5a1e0000cafe0001 GPU-5a1e0000cafe0002 " ]]; then
        ok "with worker processes rocminfo sees both GPUs the session may use, GPU 0 first"
else
        not_ok "with worker processes rocminfo should see GPU 0 and GPU 1: $(grep -E 'Name:|Uuid:' "$tmp/out")"
fi

start --contexts=shared || exit 1
"$run" --socket "$tmp/sock" rocminfo >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc != 0 ]] && grep -q 'gives no client a GPU context of its own' "$tmp/err"; then
        ok "--contexts=shared: rocminfo fails ($rc) and says why"
else
        not_ok "--contexts=shared: rocminfo exited $rc; stderr: $(cat "$tmp/err")"
fi

# As nobody in bubblewrap: /usr, /etc and the build read-only, the socket,
# /sys/devices/system (the thunk's CPU node) and nothing else of /sys or /dev.
start || exit 1
if ! command -v bwrap >/dev/null; then
        echo "SKIP: bwrap is not installed (apt-get install bubblewrap); the sandbox case was not run"
        echo "$pass passed, $fail failed"
        [[ $fail == 0 ]] || exit 1
        exit 77
fi
# kfdbroker-run, the interposer and libkfdbroker copied where nobody can
# read them (the build tree may be in a home directory nobody cannot enter).
mkdir "$tmp/bin"
cp "$run" "$(dirname "$run")/libkfdbroker-kfd.so" "$tmp/bin/"
cp -L "$(ldd "$(dirname "$run")/libkfdbroker-kfd.so" | awk '/libkfdbroker.so/ { print $3 }')" "$tmp/bin/libkfdbroker.so.0"
chmod -R a+rX "$tmp/bin"
bw=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64
    --symlink usr/bin /bin --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp
    --ro-bind /sys/devices/system /sys/devices/system --bind "$tmp/sock" /run/kfdbroker.sock
    --ro-bind "$tmp/bin" /opt/kfdbroker --setenv LD_LIBRARY_PATH /opt/kfdbroker)
as_nobody=()
if [[ $(id -u) == 0 ]]; then
        as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if ! "${as_nobody[@]}" "${bw[@]}" true 2>"$tmp/bwrap.err"; then
        echo "SKIP: bwrap cannot make a sandbox here: $(cat "$tmp/bwrap.err")"
        echo "$pass passed, $fail failed"
        [[ $fail == 0 ]] || exit 1
        exit 77
fi
"${as_nobody[@]}" "${bw[@]}" sh -c 'test -e /dev/kfd || test -e /dev/dri || test -e /sys/devices/virtual/kfd || test -e /sys/module/amdgpu'
if [[ $? != 0 ]]; then
        ok "the sandbox has no /dev/kfd, /dev/dri or KFD sysfs"
else
        not_ok "the sandbox shows a KFD node or sysfs"
fi
"${as_nobody[@]}" "${bw[@]}" sh -c "id -u; /opt/kfdbroker/kfdbroker-run --socket /run/kfdbroker.sock rocminfo" >"$tmp/out" 2>"$tmp/err"
rc=$?
check_output "bwrap as nobody" $rc "$tmp/out"
if [[ $(id -u) != 0 ]] || [[ $(head -1 "$tmp/out") == 65534 ]]; then
        ok "the sandboxed rocminfo ran unprivileged"
else
        not_ok "the sandboxed rocminfo ran as uid $(head -1 "$tmp/out")"
fi

echo "$pass passed, $fail failed"
[[ $fail == 0 ]]

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A real container reaches kfdbrokerd through the CDI spec alone:
#   1. start kfdbrokerd on the simulated GPU on a private socket, with a
#      policy granting root (the container's uid) compute dispatch;
#   2. build an image with no registry: a root filesystem of kfdbrokerctl,
#      sh, env and ls and the libraries ldd lists for them, `podman import`ed;
#   3. `kfdbrokerctl cdi --output` into the CDI directory podman reads;
#   4. control: without --device the container finds no socket
#      ("cannot connect to /run/kfdbroker/kfdbroker.sock");
#   5. `podman run --device kfdbroker.org/gpu=all IMAGE`: KFDBROKER_SOCKET is
#      set, /dev holds neither kfd nor dri, `kfdbrokerctl demo` passes (64 MiB
#      fill + copy checked byte by byte, saxpy over 16 M floats), and the
#      daemon logged the container's session.
#
# Everything podman touches stays private (docs/containers.md; the three
# workarounds of these machines): the test re-runs itself in a private mount
# namespace with a pure cgroup2 hierarchy at /sys/fs/cgroup (crun refuses the
# host's hybrid one) and fresh tmpfs on /run and /dev/shm (podman's run
# state, its lock memory and the CDI directory /run/cdi, which podman 4.3
# reads and cannot be told otherwise), with podman's storage in a temp dir;
# containers run with --cgroups=disabled and lower ulimits (root here lacks
# CAP_SYS_RESOURCE). Nothing is left on the host.
#
# Exit 77 (skip) names what is missing: root, podman, a private mount
# namespace, cgroup2, or a podman that cannot start any container here.
# Once podman runs a container, every check must pass.
#
# Environment (set by meson): KFDBROKERD, KFDBROKERCTL.
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

: "${KFDBROKERD:?KFDBROKERD is not set (run through meson test)}"
: "${KFDBROKERCTL:?KFDBROKERCTL is not set (run through meson test)}"
CONTAINER_SOCKET=/run/kfdbroker/kfdbroker.sock
IMAGE=localhost/kfdbroker-cdi-test:latest

if [[ -z ${KFDBROKER_TEST_IN_NAMESPACE:-} ]]; then
        [[ $(id -u) == 0 ]] || skip "not root: podman's CDI devices and the private mount namespace need root"
        command -v podman >/dev/null || skip "podman is not installed (apt-get install podman; ./dev test does)"
        command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
        err=$(unshare -m true 2>&1) || skip "cannot make a private mount namespace (unshare -m): $err"
        KFDBROKER_TEST_IN_NAMESPACE=1 exec unshare -m "$0" "$@"
fi

# ---- inside the private mount namespace ----
mount --make-rprivate / || skip "cannot make the mounts private in the namespace"
err=$( (umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup) 2>&1) ||
        skip "cannot mount a pure cgroup2 hierarchy at /sys/fs/cgroup (crun refuses hybrid cgroups): $err"
mount -t tmpfs -o mode=0755 tmpfs /run || skip "cannot mount a private tmpfs on /run"
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || skip "cannot mount a private tmpfs on /dev/shm"
# Specs in /etc/cdi on this host must not take part.
if [[ -d /etc/cdi ]]; then mount -t tmpfs tmpfs /etc/cdi; fi

tmp=$(mktemp -d /tmp/kfdbroker-podman.XXXXXX)
daemon_pid=
cleanup() {
        if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
        rm -rf "$tmp"
}
trap cleanup EXIT

# ---- 1. the daemon ----
mkdir "$tmp/policy.d"
printf '# The container runs as root.\n[Match]\nUser=0\n[Limits]\nComputeDispatch=yes\n' >"$tmp/policy.d/50-test.conf"
sock=$tmp/kfdbroker.sock
"$KFDBROKERD" --no-config --device=sim --listen "$sock" --policy-dir="$tmp/policy.d" --log-target=stderr 2>"$tmp/daemon.log" &
daemon_pid=$!
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.02; done
[[ -S $sock ]] || { cat "$tmp/daemon.log" >&2; fail "kfdbrokerd did not start listening on $sock"; }

# ---- 2. the image ----
rootfs=$tmp/rootfs
mkdir -p "$rootfs"/{usr/bin,bin,lib64,usr/lib/x86_64-linux-gnu,tmp,run}
add_binary() { # add_binary HOSTPATH IMAGEPATH: the binary and every library ldd lists for it
        cp -L "$1" "$rootfs/$2"
        local lib
        for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
                case $lib in
                */ld-linux-x86-64.so.*) cp -L "$lib" "$rootfs/lib64/" ;;
                *) cp -L "$lib" "$rootfs/usr/lib/x86_64-linux-gnu/" ;;
                esac
        done
}
add_binary "$KFDBROKERCTL" usr/bin/kfdbrokerctl
add_binary "$(command -v sh)" bin/sh
add_binary "$(command -v env)" usr/bin/env
add_binary "$(command -v ls)" usr/bin/ls

podman=(podman --root "$tmp/storage" --runroot "$tmp/runroot" --storage-driver vfs
        --events-backend none --cgroup-manager cgroupfs)
run_opts=(--rm --pull=never --network=none --cgroups=disabled
          --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --env PATH=/usr/bin:/bin)
err=$(tar -C "$rootfs" -c . | "${podman[@]}" import - "$IMAGE" 2>&1 >/dev/null) ||
        skip "podman import of a local root filesystem failed: $err"

# ---- 3. the spec, where podman looks ----
mkdir /run/cdi
"$KFDBROKERCTL" --socket "$sock" cdi --output /run/cdi/kfdbroker.json ||
        fail "kfdbrokerctl cdi --output /run/cdi/kfdbroker.json failed"

# ---- 4. control: no device, no socket ----
rc=0
out=$("${podman[@]}" run "${run_opts[@]}" "$IMAGE" kfdbrokerctl status 2>&1) || rc=$?
# 125-127: podman or the runtime could not run the container at all.
if ((rc >= 125 && rc <= 127)); then
        skip "podman cannot run a container here (exit $rc): $out"
fi
((rc == 1)) || fail "without --device, kfdbrokerctl status should fail to connect (exit 1), got exit $rc: $out"
[[ $out == *"cannot connect to $CONTAINER_SOCKET: No such file or directory"* ]] ||
        fail "without --device the container should find no socket, got: $out"
echo "ok: without --device the container has no socket: $out"

# ---- 5. with the CDI device ----
rc=0
out=$("${podman[@]}" run "${run_opts[@]}" --device kfdbroker.org/gpu=all "$IMAGE" \
        sh -c 'env; echo "dev:" $(ls /dev) ":end"; exec kfdbrokerctl demo' 2>&1) || rc=$?
echo "$out"
((rc == 0)) || fail "podman run --device kfdbroker.org/gpu=all ... kfdbrokerctl demo exited $rc"
grep -qx "KFDBROKER_SOCKET=$CONTAINER_SOCKET" <<<"$out" || fail "KFDBROKER_SOCKET=$CONTAINER_SOCKET is not in the container's environment"
devs=$(grep '^dev: ' <<<"$out")
[[ $devs != *" kfd "* && $devs != *" dri "* && $devs == *" null "* && $devs == *" :end" ]] ||
        fail "the container's /dev should have neither kfd nor dri: $devs"
grep -q "^  checked all 67108864 bytes of both buffers through their dma-buf mappings: correct$" <<<"$out" ||
        fail "the demo did not check its 64 MiB copy"
# saxpy runs unless kfdbrokerctl was built without clang-15 (the policy grants compute).
if [[ $out == *"compute skipped: "* ]]; then
        [[ $out == *"was not found when kfdbrokerctl was built"* ]] || fail "the demo skipped compute: $out"
else
        grep -q "^  checked all 16777216 elements of y through its dma-buf mapping against the CPU: correct$" <<<"$out" ||
                fail "the demo did not check saxpy"
fi
grep -qx "demo passed" <<<"$out" || fail "the demo did not pass"

# ---- the daemon saw the container's sessions, and stops cleanly ----
kill -TERM "$daemon_pid"
drc=0
wait "$daemon_pid" || drc=$?
daemon_pid=
grep -q 'Session 1 opened: pid [0-9]* uid 0 gid 0 comm "kfdbrokerctl"' "$tmp/daemon.log" ||
        { cat "$tmp/daemon.log" >&2; fail "the daemon did not log the container's session"; }
((drc == 0)) || { cat "$tmp/daemon.log" >&2; fail "kfdbrokerd exited with status $drc on SIGTERM"; }
echo "ok: podman run --device kfdbroker.org/gpu=all: kfdbrokerctl demo passed through the socket alone"

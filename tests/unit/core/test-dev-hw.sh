#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `./dev test-hw` on a machine without the GPU node it looks for: it says it
# skipped, naming the node, exits 0, and builds and starts nothing (its
# KFDBROKER_TEST_HW_KFD points it at a path that does not exist).
# Usage: test-dev-hw.sh SOURCE_ROOT
set -u

src=$1
missing=$(mktemp -u /tmp/kfdbroker-no-kfd.XXXXXX)
out=$(KFDBROKER_TEST_HW_KFD=$missing "$src/dev" test-hw 2>&1)
rc=$?
echo "$out"
if ((rc != 0)); then
        echo "not ok - ./dev test-hw without $missing exited $rc, expected 0"
        exit 1
fi
want="test-hw: skipped: $missing does not exist on this machine (no AMD GPU, or the amdgpu driver is not loaded); nothing was run"
if [[ $out != "$want" ]]; then
        echo "not ok - ./dev test-hw printed something else than: $want"
        exit 1
fi
echo "ok - ./dev test-hw skips, and says why, without $missing"

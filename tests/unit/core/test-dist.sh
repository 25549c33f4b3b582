#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The release tarball builds: `meson dist --no-tests` in a clone of the
# checkout's HEAD (what dist packs: committed files only), then the tarball
# unpacked elsewhere, configured and its daemon and kfdbrokerctl built and
# run (--version, the tarball's version); the tarball holds LICENSE and NEWS,
# and NEWS has an entry for the version. Skips (exit 77) outside a git
# checkout. About a minute; the tests are not built.
# Usage: test-dist.sh SOURCE_ROOT VERSION
set -u

src=$1 version=$2
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; [[ $# -gt 1 ]] && tail -n 30 <<<"$2" | sed 's/^/#   /'; fail=$((fail + 1)); }

if ! command -v git >/dev/null || ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        echo "SKIP: $src is not a git checkout (meson dist needs one)"
        exit 77
fi
tmp=$(mktemp -d /tmp/kfdbroker-dist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

head=$(git -C "$src" rev-parse HEAD)
git clone -q --no-checkout "$src" "$tmp/clone" && git -C "$tmp/clone" checkout -q "$head" ||
        { not_ok "git clone of $src"; exit 1; }

# Only the programs: the tests' build (kernels, criterion) is not what a
# distribution's tarball check is about, and would take minutes here.
if out=$(meson setup "$tmp/clone/build" "$tmp/clone" -Dtests=disabled 2>&1 &&
         meson dist -C "$tmp/clone/build" --no-tests --formats=xztar 2>&1); then
        ok "meson dist --no-tests"
else
        not_ok "meson dist --no-tests" "$out"
        exit 1
fi
tarball=$tmp/clone/build/meson-dist/kfdbroker-$version.tar.xz
[[ -f $tarball ]] && ok "the tarball is kfdbroker-$version.tar.xz" || { not_ok "no $tarball" "$(ls -R "$tmp/clone/build/meson-dist")"; exit 1; }

list=$(tar -tJf "$tarball")
for f in LICENSE NEWS README.md meson.build units/kfdbrokerd.conf docs/man/kfdbrokerd.8; do
        grep -qx "kfdbroker-$version/$f" <<<"$list" && ok "the tarball has $f" || not_ok "the tarball lacks $f"
done
grep -q "^Version $version\b" "$src/NEWS" && ok "NEWS has an entry for $version" || not_ok "NEWS has no 'Version $version' entry"
grep -q "Copyright (c) .* the kfdbroker authors" "$src/LICENSE" && grep -q "^MIT License" "$src/LICENSE" &&
        ok "LICENSE: MIT, the kfdbroker authors" || not_ok "LICENSE"

mkdir "$tmp/unpacked"
tar -C "$tmp/unpacked" -xJf "$tarball"
dir=$tmp/unpacked/kfdbroker-$version
if out=$(meson setup "$tmp/b" "$dir" -Dtests=disabled 2>&1 &&
         ninja -C "$tmp/b" daemon/kfdbrokerd client/kfdbrokerctl 2>&1); then
        ok "the unpacked tarball configures and builds kfdbrokerd and kfdbrokerctl"
else
        not_ok "building from the tarball" "$out"
        exit 1
fi
[[ $("$tmp/b/daemon/kfdbrokerd" --version) == "kfdbrokerd $version" ]] &&
        ok "kfdbrokerd --version says $version" || not_ok "kfdbrokerd --version: $("$tmp/b/daemon/kfdbrokerd" --version)"
[[ $("$tmp/b/client/kfdbrokerctl" --version) == "kfdbrokerctl $version" ]] &&
        ok "kfdbrokerctl --version says $version" || not_ok "kfdbrokerctl --version"

echo "# $pass passed, $fail failed"
[[ $fail == 0 ]]

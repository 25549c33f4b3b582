#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# libkfdbroker as a user of the installed library meets it: `meson install`
# into a staging directory, then
#   - `pkg-config --modversion libkfdbroker` is the release (meson.build's
#     project version, also what `kfdbrokerctl --version` prints), while the
#     library file carries the ABI version (libkfdbroker.so.ABI, soname
#     libkfdbroker.so.0) — two numbers, each where it belongs;
#   - a program built with `pkg-config --cflags --libs libkfdbroker` compiles
#     against the installed kfdbroker.h, links, names libkfdbroker.so.0 and runs;
#   - README.md and libkfdbroker(3) name the module as pkg-config knows it.
# Usage: test-pkgconfig.sh BUILD_DIR SOURCE_ROOT PROJECT_VERSION ABI_VERSION CC KFDBROKERCTL
set -u

build=$1 src=$2 version=$3 abi=$4 cc=$5 ctl=$6
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; shift; for l in "$@"; do echo "    $l"; done; fail=$((fail + 1)); }

if ! command -v pkg-config >/dev/null; then
        echo "pkg-config is not installed (apt-get install pkg-config)"
        exit 77
fi
tmp=$(mktemp -d /tmp/kfdb-pkgconfig.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if ! out=$(meson install -C "$build" --no-rebuild --destdir "$tmp/dest" 2>&1); then
        not_ok "meson install --destdir" "$(tail -5 <<<"$out")"
        echo "$pass passed, $fail failed"
        exit 1
fi
pc=$(find "$tmp/dest" -name libkfdbroker.pc -path '*/pkgconfig/*' | head -1)
if [[ -n $pc ]]; then
        ok "libkfdbroker.pc is installed (${pc#"$tmp/dest"})"
else
        not_ok "no libkfdbroker.pc under the install"
fi
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$tmp/dest PKG_CONFIG_LIBDIR=

got=$(pkg-config --modversion libkfdbroker 2>&1)
if [[ $got == "$version" ]]; then
        ok "pkg-config --modversion libkfdbroker is the project version $version"
else
        not_ok "pkg-config --modversion libkfdbroker says '$got', meson.build's version is $version"
fi
got=$("$ctl" --version)
if [[ $got == "kfdbrokerctl $version" ]]; then
        ok "kfdbrokerctl --version says the same release"
else
        not_ok "kfdbrokerctl --version says '$got'"
fi

# (pkg-config puts the sysroot in front of it.)
libdir=$(pkg-config --variable=libdir libkfdbroker)
libdir=${libdir#"$tmp/dest"}
lib=$tmp/dest$libdir/libkfdbroker.so.$abi
if [[ -f $lib && ! -L $lib ]]; then
        ok "the library file carries the ABI version: libkfdbroker.so.$abi"
else
        not_ok "no libkfdbroker.so.$abi in $libdir" "$(ls "$tmp/dest$libdir" 2>&1)"
fi
soname=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ $soname == libkfdbroker.so.0 ]]; then
        ok "soname libkfdbroker.so.0"
else
        not_ok "soname is '$soname'"
fi

cat >"$tmp/prog.c" <<'EOC'
#include <stdio.h>
#include <kfdbroker.h>
int main(void) {
        kfdb_session *s = NULL;
        /* Nothing listens there: the library answers with a negative errno. */
        int r = kfdb_session_new("/nonexistent/kfdbroker.sock", "pkg-config-test", &s);
        printf("%s %d\n", kfdb_default_socket_path(), r);
        return s != NULL;
}
EOC
# shellcheck disable=SC2046
if out=$("$cc" -Werror $(pkg-config --cflags libkfdbroker) "$tmp/prog.c" -o "$tmp/prog" $(pkg-config --libs libkfdbroker) 2>&1); then
        ok "a program builds with pkg-config --cflags --libs libkfdbroker"
        needed=$(readelf -d "$tmp/prog" | sed -n 's/.*(NEEDED).*\[\(libkfdbroker[^]]*\)\]/\1/p')
        if [[ $needed == libkfdbroker.so.0 ]]; then
                ok "it needs libkfdbroker.so.0"
        else
                not_ok "it needs '$needed'"
        fi
        out=$(LD_LIBRARY_PATH=$tmp/dest$libdir "$tmp/prog" 2>&1)
        if [[ $out =~ ^/.+\ -2$ ]]; then
                ok "it runs against the installed library: $out"
        else
                not_ok "it printed '$out'"
        fi
else
        not_ok "building with pkg-config failed" "$out"
fi

for doc in README.md docs/man/libkfdbroker.3; do
        if grep -q 'pkg-config .*libkfdbroker' "$src/$doc" 2>/dev/null; then
                ok "$doc names the pkg-config module libkfdbroker"
        else
                not_ok "$doc does not show pkg-config with libkfdbroker"
        fi
done

echo "$pass passed, $fail failed"
[[ $fail == 0 ]]

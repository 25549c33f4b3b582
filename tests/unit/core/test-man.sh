#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The man pages stay true to the programs: every command kfdbrokerctl --help
# lists has an entry (a line ".B COMMAND" or ".BR COMMAND ...") in
# kfdbrokerctl.1, and every option that kfdbrokerctl --help, kfdbrokerd --help
# and the commands' usage lines name appears in the page; every function of
# kfdbroker.h and every symbol version of libkfdbroker.sym is in
# libkfdbroker.3; every option of kfdbroker-run --help is in kfdbroker-run.1;
# every page renders without groff warnings.
# Usage: test-man.sh KFDBROKERCTL KFDBROKERD SOURCE_ROOT KFDBROKER_RUN
set -u

ctl=$1 daemon=$2 src=$3 run=$4
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }

# The page's text with troff's escaped dashes and font changes undone.
plain() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1"; }

check_page() { # check_page PAGE HELP_TEXT [COMMANDS...]
        local page=$1 help=$2 text opt
        shift 2
        text=$(plain "$page")
        for c in "$@"; do
                if grep -Eq "^\.BR? $c( |$)" <<<"$text"; then
                        ok "$(basename "$page") has an entry for '$c'"
                else
                        not_ok "$(basename "$page") has no entry for '$c'"
                fi
        done
        # Long options, and short ones in usage brackets ("[-d SEC]") or option columns.
        for opt in $(grep -Eo -- '(^|[ [])--?[a-z][a-z-]*' <<<"$help" | tr -d ' [' | sort -u); do
                if grep -Fq -- "$opt" <<<"$text"; then
                        ok "$(basename "$page") mentions $opt"
                else
                        not_ok "$(basename "$page") does not mention $opt"
                fi
        done
}

help=$("$ctl" --help) || not_ok "kfdbrokerctl --help failed"
commands=$(sed -n '/^Commands:/,/^$/p' <<<"$help" | awk 'NR > 1 && NF { print $1 }')
if [[ -n $commands ]]; then
        ok "kfdbrokerctl --help lists $(wc -w <<<"$commands") commands"
else
        not_ok "no commands found in kfdbrokerctl --help"
fi
# shellcheck disable=SC2086
check_page "$src/docs/man/kfdbrokerctl.1" "$help" $commands

help=$("$daemon" --help) || not_ok "kfdbrokerd --help failed"
check_page "$src/docs/man/kfdbrokerd.8" "$help"

help=$("$run" --help) || not_ok "kfdbroker-run --help failed"
check_page "$src/docs/man/kfdbroker-run.1" "$help"

# libkfdbroker(3): every function the public header declares is in its
# synopsis, as "NAME(" once troff's fonts are undone.
text=$(plain "$src/docs/man/libkfdbroker.3" | tr -d '"')
functions=$(grep -Eo '\<kfdb_[a-z0-9_]+\(' "$src/client/kfdbroker.h" | tr -d '(' | sort -u)
if [[ $(wc -w <<<"$functions") -gt 50 ]]; then
        ok "kfdbroker.h declares $(wc -w <<<"$functions") functions"
else
        not_ok "only $(wc -w <<<"$functions") functions found in kfdbroker.h"
fi
for f in $functions; do
        if grep -Eq "(^|[ *])$f ?\(" <<<"$text"; then
                ok "libkfdbroker.3 has $f()"
        else
                not_ok "libkfdbroker.3 does not document $f()"
        fi
done
for symver in $(grep -Eo '^KFDBROKER_[0-9.]+' "$src/client/libkfdbroker.sym"); do
        if grep -q "$symver" <<<"$text"; then
                ok "libkfdbroker.3 names the symbol version $symver"
        else
                not_ok "libkfdbroker.3 does not name the symbol version $symver"
        fi
done

for page in "$src"/docs/man/*.[0-9]; do
        if ! command -v groff >/dev/null; then
                not_ok "groff is needed to check the pages (apt-get install groff-base)"
                break
        fi
        out=$(groff -ww -z -man "$page" 2>&1)
        if [[ -z $out ]]; then
                ok "$(basename "$page") renders without warnings"
        else
                not_ok "$(basename "$page"): $out"
        fi
done

echo "$pass passed, $fail failed"
[[ $fail == 0 ]]

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The shell completions of kfdbrokerctl (client/completions) offer exactly
# the commands `kfdbrokerctl --help` lists, and its global options:
#   - bash: the completion function, run as bash runs it (COMP_WORDS), after
#     "kfdbrokerctl ", after "kfdbrokerctl --json " and after "kfdbrokerctl -";
#   - fish: `complete -C 'kfdbrokerctl '` with the file loaded, as fish
#     itself completes;
#   - zsh: the file parses (zsh -n) and its commands and global option arrays.
# Usage: test-completions.sh KFDBROKERCTL SOURCE_ROOT
set -u

ctl=$1 src=$2
dir=$src/client/completions
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; shift; for l in "$@"; do echo "    $l"; done; fail=$((fail + 1)); }
words() { tr ' \t' '\n\n' | sed '/^$/d' | sort -u | tr '\n' ' '; }
same() { # same WHAT WANT GOT
        if [[ $2 == "$3" ]]; then
                ok "$1: $2"
        else
                not_ok "$1" "kfdbrokerctl --help: $2" "completion:         $3"
        fi
}

help=$("$ctl" --help)
commands=$(sed -n '/^Commands:/,/^$/p' <<<"$help" | awk 'NR > 1 && NF { print $1 }' | words)
options=$(sed -n '/^Options:/,$p' <<<"$help" | grep -Eo -- '(^|[ ])--[a-z][a-z-]*' | words)
if [[ $(wc -w <<<"$commands") -ge 10 && $options == *--json* ]]; then
        ok "kfdbrokerctl --help lists $(wc -w <<<"$commands") commands and the options $options"
else
        not_ok "cannot read the commands and options from kfdbrokerctl --help" "$help"
fi

# --- bash ---
bash_complete() { # bash_complete WORD... (the last one is being completed)
        bash --norc --noprofile -c '
                source "$1"; shift
                COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
                _kfdbrokerctl
                printf "%s\n" "${COMPREPLY[@]}"' bash "$dir/kfdbrokerctl.bash" "$@" 2>&1
}
same "bash completes the commands" "$commands" "$(bash_complete kfdbrokerctl "" | words)"
same "bash completes the commands after a global option" "$commands" \
        "$(bash_complete kfdbrokerctl --json "" | words)"
same "bash completes the global options" "$options" "$(bash_complete kfdbrokerctl - | sed 's/=$//' | words)"
same "bash completes reload's options" "--json --no-ask-password --socket " \
        "$(bash_complete kfdbrokerctl reload - | sed 's/=$//' | words)"

# --- fish ---
if command -v fish >/dev/null; then
        fish_complete() {
                fish --no-config -c "source $(printf %q "$dir/kfdbrokerctl.fish"); complete -C '$1'" 2>&1 | cut -f1
        }
        same "fish completes the commands" "$commands" "$(fish_complete 'kfdbrokerctl ' | words)"
        same "fish completes the global options" "$options" "$(fish_complete 'kfdbrokerctl --' | words)"
        same "fish completes no command after a command" "" "$(fish_complete 'kfdbrokerctl status ' | words)"
else
        not_ok "fish is needed to check the fish completion (apt-get install fish)"
fi

# --- zsh ---
if command -v zsh >/dev/null; then
        if out=$(zsh -n "$dir/_kfdbrokerctl" 2>&1); then
                ok "zsh parses _kfdbrokerctl"
        else
                not_ok "zsh -n _kfdbrokerctl" "$out"
        fi
        zsh_commands=$(sed -n '/^ *commands=(/,/^ *)/p' "$dir/_kfdbrokerctl" | grep -Eo "^ *'[a-z-]+:" | tr -d " ':" | words)
        same "zsh's commands" "$commands" "$zsh_commands"
        zsh_options=$(sed -n '/^ *global=(/,/^ *)/p' "$dir/_kfdbrokerctl" | grep -Eo -- "--[a-z][a-z-]*" | words)
        same "zsh's global options" "$options" "$zsh_options"
else
        not_ok "zsh is needed to check the zsh completion (apt-get install zsh)"
fi

echo "$pass passed, $fail failed"
[[ $fail == 0 ]]

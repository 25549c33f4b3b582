# SPDX-License-Identifier: MIT
# bash completion for kfdbrokerctl(1). Standalone (no bash-completion helpers
# needed); installed to bash-completion's completionsdir. The command list is
# checked against `kfdbrokerctl --help` by tests/unit/core/test-completions.sh.

_kfdbrokerctl() {
        local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
        local commands="status device demo kernels selftest cdi sessions accounting metrics top limits reload policy terminate"
        local global="--socket= --json --no-ask-password --help --version"
        local limit_keys="BufferMemory= MaxBufferSize= Buffers= Events= JobsInFlight= Weight= Priority= ComputeDispatch= Isolation= JobTimeout= DispatchTimeout= UserBufferMemory= UserBuffers= UnitBufferMemory= UserJobsInFlight= Queues= Devices="
        local i verb= nargs=0

        # The command is the first word that is not an option (--socket takes a value).
        for ((i = 1; i < COMP_CWORD; i++)); do
                case ${COMP_WORDS[i]} in
                --socket) ((i++)) ;;
                -*) ;;
                *)
                        if [[ -z $verb ]]; then verb=${COMP_WORDS[i]}; else ((nargs++)); fi
                        ;;
                esac
        done

        if [[ $prev == --socket ]]; then
                COMPREPLY=($(compgen -f -- "$cur"))
                return
        fi
        if [[ $cur == --socket=* ]]; then
                COMPREPLY=($(compgen -f -P --socket= -- "${cur#--socket=}"))
                return
        fi
        if [[ -z $verb ]]; then
                if [[ $cur == -* ]]; then
                        COMPREPLY=($(compgen -W "$global" -- "$cur"))
                else
                        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                fi
                [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
                return
        fi

        local opts="--socket= --json --no-ask-password"
        case $verb in
        demo) opts+=" --size= --vram --elements=" ;;
        selftest) opts+=" --strict --timeout-wait= --gpu= --all" ;;
        cdi) opts+=" --output= --rocm-dir=" ;;
        top) opts+=" -b --batch -d --delay= -n --iterations=" ;;
        terminate)
                opts+=" --bus"
                if [[ $cur != -* ]] && ((nargs == 0)); then
                        COMPREPLY=($(compgen -W "$(kfdbrokerctl sessions 2>/dev/null | awk 'NR > 1 { print $1 }')" -- "$cur"))
                        return
                fi
                ;;
        kernels)
                if [[ $cur != -* ]]; then
                        COMPREPLY=($(compgen -f -- "$cur"))
                        return
                fi
                ;;
        policy)
                if ((nargs == 0)); then
                        COMPREPLY=($(compgen -W "check" -- "$cur"))
                else
                        COMPREPLY=($(compgen -d -- "$cur"))
                fi
                return
                ;;
        limits)
                if [[ $cur != -* ]]; then
                        if ((nargs == 0)); then
                                # Session ids, from the daemon (nothing if it cannot be asked).
                                COMPREPLY=($(compgen -W "$(kfdbrokerctl sessions 2>/dev/null | awk 'NR > 1 { print $1 }')" -- "$cur"))
                        else
                                COMPREPLY=($(compgen -W "$limit_keys" -- "$cur"))
                                compopt -o nospace 2>/dev/null
                        fi
                        return
                fi
                ;;
        esac
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
}

complete -F _kfdbrokerctl kfdbrokerctl

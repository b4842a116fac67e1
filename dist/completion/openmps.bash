# SPDX-License-Identifier: MIT
# bash completion for openmps(1) and openmps-control(8) (installed as
# share/bash-completion/completions/openmps, .../openmps-control and, with the drop-in name,
# .../nvidia-cuda-mps-control: bash-completion loads the file named as the command typed).
# tests/install/check_install.sh runs both completers on sample command lines. Plain bash: it
# needs nothing of the bash-completion package (its _command_offset is used when present).

_openmps()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
    local i cmd=
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        -*) ;;
        *) cmd=${words[i]}; break ;;
        esac
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W '--help --version -h -V' -- "$cur"))
        else
            COMPREPLY=($(compgen -W 'run check cdi stats ps smi top help version' -- "$cur"))
        fi
        return
    fi
    case $cmd in
    stats)
        COMPREPLY=($(compgen -W '--json -p' -- "$cur"))
        ;;
    ps)
        COMPREPLY=($(compgen -W '-v --json -p' -- "$cur"))
        ;;
    smi)
        COMPREPLY=($(compgen -W '-p' -- "$cur"))
        ;;
    top)
        case $prev in
        -s | --sort)
            COMPREPLY=($(compgen -W 'gpu time mem calls kernels pid' -- "$cur"))
            ;;
        -d | --delay | -n | --iterations | -p) ;;
        *)
            COMPREPLY=($(compgen -W '-d -n -s -p -b --once --help' -- "$cur"))
            ;;
        esac
        ;;
    cdi)
        case $prev in
        -o | --output | --shim | --container-shim)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        --pipe-dir | --container-pipe-dir | --install-shim)
            COMPREPLY=($(compgen -d -- "$cur"))
            return
            ;;
        --kind | --name | --env) return ;;
        esac
        COMPREPLY=($(compgen -W '-o --output --pipe-dir --container-pipe-dir --shim
            --install-shim --container-shim --kind --name --env --help' -- "$cur"))
        ;;
    run | check)
        if [[ $cmd == check && $prev == @(-o|--output) ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
            return
        fi
        # after the option words, the program and its own arguments
        local j first=
        for ((j = i + 1; j < cword; j++)); do
            case ${words[j]} in
            --) first=$((j + 1)); break ;;
            -o | --output) ((j++)) ;;
            -*) ;;
            *) first=$j; break ;;
            esac
        done
        if [[ -n $first ]] && declare -F _command_offset >/dev/null; then
            _command_offset "$first"
        elif [[ -n $first ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ $cur == -* ]]; then
            if [[ $cmd == check ]]; then
                COMPREPLY=($(compgen -W '-o --output --help --' -- "$cur"))
            else
                COMPREPLY=($(compgen -W '--help --' -- "$cur"))
            fi
        else
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        ;;
    esac
}
complete -F _openmps openmps

_openmps_control()
{
    local cur=${COMP_WORDS[COMP_CWORD]} words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
    local commands='get_server_list get_server_status start_server get_client_list
        get_device_client_list ps stats shutdown_server terminate_client quit
        set_default_active_thread_percentage get_default_active_thread_percentage
        set_active_thread_percentage get_active_thread_percentage
        set_default_device_pinned_mem_limit get_default_device_pinned_mem_limit
        set_device_pinned_mem_limit get_device_pinned_mem_limit
        set_default_client_priority get_default_client_priority device_query help
        sm_partition lspart'
    if ((cword == 1)); then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W '-d --daemon -f --foreground -v --version -h --help
                -S --static-partitioning' -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi
    case ${words[1]} in
    -*) return ;;
    start_server)
        ((cword == 2)) && COMPREPLY=($(compgen -W '-uid' -- "$cur"))
        ;;
    quit)
        ((cword == 2)) && COMPREPLY=($(compgen -W '-t' -- "$cur"))
        ;;
    ps)
        COMPREPLY=($(compgen -W '-v --json -p' -- "$cur"))
        ;;
    stats)
        COMPREPLY=($(compgen -W '--json --smi -p' -- "$cur"))
        ;;
    shutdown_server)
        ((cword == 3)) && COMPREPLY=($(compgen -W '-f' -- "$cur"))
        ;;
    set_default_client_priority)
        ((cword == 2)) && COMPREPLY=($(compgen -W '0 1' -- "$cur"))
        ;;
    device_query)
        COMPREPLY=($(compgen -W '--csv' -- "$cur"))
        ;;
    sm_partition)
        ((cword == 2)) && COMPREPLY=($(compgen -W 'add rm' -- "$cur"))
        ;;
    esac
}
complete -F _openmps_control openmps-control nvidia-cuda-mps-control

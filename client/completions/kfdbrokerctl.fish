# SPDX-License-Identifier: MIT
# fish completion for kfdbrokerctl(1), installed to fish's
# vendor_completions.d. The command list is checked against
# `kfdbrokerctl --help` by tests/unit/core/test-completions.sh.

set -l commands status device demo kernels selftest cdi sessions accounting metrics top limits reload policy terminate

complete -c kfdbrokerctl -f
complete -c kfdbrokerctl -l socket -r -F -d 'socket of kfdbrokerd'
complete -c kfdbrokerctl -l json -d 'print JSON instead of text'
complete -c kfdbrokerctl -l no-ask-password -d 'do not ask for a password when polkit wants one'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -s h -l help -d 'show the help'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -l version -d 'show the version'

complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a status -d "show the daemon's version, device, sessions, jobs and memory"
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a device -d 'show the GPU the daemon serves'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a demo -d 'fill, copy and check buffers on the GPU; run saxpy'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a kernels -d 'list the kernels of a GPU code object'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a selftest -d 'check copy, fill, events, a dispatch, a fault and a timeout on the GPU'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a cdi -d 'print a CDI spec giving containers the socket'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a sessions -d 'list every client session'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a accounting -d 'GPU use per session and per identity'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a metrics -d 'print the OpenMetrics text'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a top -d "live view of every session's GPU use"
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a limits -d "show or set a session's limits"
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a reload -d 'reload the policy files'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a policy -d 'check policy directories as a reload would'
complete -c kfdbrokerctl -n "not __fish_seen_subcommand_from $commands" -a terminate -d 'end a session of yours (root: any)'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from terminate' -l bus -d 'over D-Bus'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from terminate' -a '(kfdbrokerctl sessions 2>/dev/null | string match -r "^\d+")' -d session

complete -c kfdbrokerctl -n '__fish_seen_subcommand_from demo' -l size -r -d 'buffer size'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from demo' -l vram -d 'allocate in VRAM'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from demo' -l elements -r -d 'saxpy elements'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from kernels' -F
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from selftest' -l strict -d 'fail on skipped checks too'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from selftest' -l timeout-wait -r -d 'how long the timeout check waits (ms)'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from selftest' -l gpu -r -d 'the GPU to check, by index'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from selftest' -l all -d 'check every GPU in turn'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from cdi' -l output -r -F -d 'write the spec to FILE'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from cdi' -l rocm-dir -r -a '(__fish_complete_directories)' -d 'take kfdbroker-run and the interposer from DIR'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from top' -s b -l batch -d 'batch mode'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from top' -s d -l delay -r -d 'seconds between refreshes'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from top' -s n -l iterations -r -d 'stop after N refreshes'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from limits' -a '(kfdbrokerctl sessions 2>/dev/null | string match -r "^\d+")' -d session
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from limits' -a 'BufferMemory= MaxBufferSize= Buffers= Events= JobsInFlight= Weight= Priority= ComputeDispatch= Isolation= JobTimeout= DispatchTimeout= UserBufferMemory= UserBuffers= UnitBufferMemory= UserJobsInFlight= Queues= Devices='
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from policy; and not __fish_seen_subcommand_from check' -a check -d 'check policy directories'
complete -c kfdbrokerctl -n '__fish_seen_subcommand_from policy; and __fish_seen_subcommand_from check' -a '(__fish_complete_directories)'

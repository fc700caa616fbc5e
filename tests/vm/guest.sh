#!/bin/sh
# Runs inside a kernel-matrix guest (see xtask/src/vm.rs), on the host's / shared read-only
# over 9p: prepares what a booted system would have, records the tracepoint formats the
# loader depends on, runs the focused end-to-end set, and powers off. The last line the host
# reads is "TD-VM-RESULT rc=N"; anything else (a hang, a panic) is a retry or a failure.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TMPDIR=/tmp CI=1 TD_VM=1 RUST_BACKTRACE=1
# The kernel's BPF run time statistics stay off in the guests: switching them (trapdetect
# does, once at attach and then a second in every ten) flips bpf_stats_enabled_key, whose
# text patching races the other vCPU running the tracepoint programs under QEMU's
# multi-threaded TCG: the 6.12 guest died of "Oops: int3" in bpf_trace_run1/2, at that key's
# site, in two attempts of three (2026-12-05). Real CPUs synchronize the patch. The x86 guests
# now run their vCPUs in one host thread (xtask/src/vm.rs), which removes that race for every
# patch (tracepoints enabled at attach too); the statistics stay off as well: the matrix tests
# attachment and attribution, and no guest test reads the programs' run time.
export TRAPDETECT_BPF_STATS=off
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tracefs nodev /sys/kernel/tracing
ip link set lo up
echo "TD-VM-KERNEL $(uname -r)"
for f in sched/sched_process_exit sched/sched_process_fork sock/inet_sock_set_state \
    fuse/fuse_request_send syscalls/sys_enter_newfstatat syscalls/sys_exit_newfstatat; do
    if [ -e "/sys/kernel/tracing/events/$f/format" ]; then
        echo "TD-VM-FORMAT-BEGIN $f"
        cat "/sys/kernel/tracing/events/$f/format"
        echo "TD-VM-FORMAT-END"
    fi
done
cd /tmp
# $2: the trapdetect binary the tests run (`cargo xtask test` passes the static one it packed).
if [ -n "$2" ]; then
    export TRAPDETECT_BIN="$2"
    echo "TD-VM-BIN $2"
fi
# $3: the kernel's BTF file where the kernel has none (the BTF-less guest): kernels.rs gives
# it to trapdetect with --btf.
if [ -n "$3" ]; then
    export TD_BTF="$3"
    echo "TD-VM-BTF $3"
fi
# $1: comma-separated test executables, each optionally "@test_name" (run exactly that one).
# --nocapture: the focused tests print the "TD-KERNEL-ROW" lines the host collects.
rc=0
for item in $(echo "$1" | tr ',' ' '); do
    bin="${item%%@*}"
    if [ "$bin" = "$item" ]; then
        echo "TD-VM-RUN $bin"
        "$bin" --test-threads=1 --nocapture 2>&1 || rc=1
    else
        echo "TD-VM-RUN $bin ${item#*@}"
        "$bin" --test-threads=1 --nocapture --exact "${item#*@}" 2>&1 || rc=1
    fi
done
echo "TD-VM-RESULT rc=$rc"
sync
echo b > /proc/sysrq-trigger

//! Program and map names, so the loader never types a name the eBPF object does not have.

/// The raw `sys_enter` program: dispatches the path calls, `accept` and `connect` by number.
pub const PROG_SYS_ENTER_PATH: &str = "sys_enter_path";
/// The raw `sys_exit` program: completes what `sys_enter_path` recorded.
pub const PROG_SYS_EXIT_PATH: &str = "sys_exit_path";
/// Counts successful `accept`/`accept4` of traced processes (the request denominator): a
/// part of the syscall dispatch, not a program of its own.
pub const PROG_SYS_EXIT_ACCEPT: &str = "sys_exit_accept";
/// Follows forks of traced processes.
pub const PROG_SCHED_PROCESS_FORK: &str = "sched_process_fork";
/// Forgets traced processes that exit.
pub const PROG_SCHED_PROCESS_EXIT: &str = "sched_process_exit";
/// Counts FUSE requests sent on behalf of traced processes.
pub const PROG_FUSE_REQUEST_SEND: &str = "fuse_request_send";
/// Times FUSE requests of traced processes by the requests ahead of them.
pub const PROG_FUSE_REQUEST_END: &str = "fuse_request_end";
/// Counts TCP state changes by port (`sock/inet_sock_set_state`).
pub const PROG_INET_SOCK_SET_STATE: &str = "inet_sock_set_state";
/// Counts payload the server's sockets receive on its ports (`tcp/tcp_probe`).
pub const PROG_TCP_PROBE: &str = "tcp_probe";
/// Starts timing connect() of watched clients (a part of the syscall dispatch).
pub const PROG_SYS_ENTER_CONNECT: &str = "sys_enter_connect";
/// Times and classifies connect() of watched clients (a part of the syscall dispatch).
pub const PROG_SYS_EXIT_CONNECT: &str = "sys_exit_connect";

/// Path calls (and accepts) between entry and exit, by thread-id slot.
pub const MAP_INFLIGHT: &str = "INFLIGHT";
/// connect() calls of watched clients between entry and exit, by thread-id slot.
pub const MAP_CONNECT_INFLIGHT: &str = "CONNECT_INFLIGHT";
/// tgid-indexed array: non-zero when the process is traced.
pub const MAP_TRACED: &str = "TRACED";
/// Per path key statistics (per-CPU LRU hash).
pub const MAP_PATH_STATS: &str = "PATH_STATS";
/// Completed calls per syscall kind (per-CPU array).
pub const MAP_KIND_COUNTS: &str = "KIND_COUNTS";
/// Self-monitoring counters (per-CPU array), see [`crate::counters`].
pub const MAP_COUNTERS: &str = "COUNTERS";
/// First sightings of path keys, with their strings.
pub const MAP_PATH_EVENTS: &str = "PATH_EVENTS";
/// FUSE requests by (connection, opcode) (per-CPU hash).
pub const MAP_FUSE_OPS: &str = "FUSE_OPS";
/// FUSE requests of traced processes in flight, send to end (LRU hash).
pub const MAP_FUSE_SENT: &str = "FUSE_SENT";
/// Traced processes' FUSE requests in flight per connection (per-CPU hash: send adds on one
/// CPU, end subtracts on another; the sum over CPUs is the count).
pub const MAP_FUSE_INFLIGHT: &str = "FUSE_INFLIGHT";
/// FUSE request latency by (connection, requests ahead) (per-CPU hash).
pub const MAP_FUSE_QUEUE: &str = "FUSE_QUEUE";
/// port-indexed array: 1 + slot of a watched port, 0 for the others.
pub const MAP_PORT_SLOT: &str = "PORT_SLOT";
/// Watched network namespaces by inode number.
pub const MAP_NETNS: &str = "NETNS";
/// TCP events, host-wide and on watched ports (per-CPU array).
pub const MAP_TCP_TOTALS: &str = "TCP_TOTALS";
/// TCP events per watched port and direction (per-CPU array).
pub const MAP_TCP_PORTS: &str = "TCP_PORTS";
/// Map: remote ports traced processes connected to (their upstreams), with connects.
pub const MAP_UPSTREAM: &str = "UPSTREAM";
/// port-indexed array: non-zero for the ports whose received payload counts (`tcp_probe`).
pub const MAP_SERVED_PORT: &str = "SERVED_PORT";
/// Payload bytes, data segments and requests received on those ports (per-CPU array).
pub const MAP_SERVED: &str = "SERVED";
/// Socket → its `snd_nxt` at its last data segment (LRU hash): where requests start.
pub const MAP_SERVED_LAST: &str = "SERVED_LAST";
/// connect() count and latency of watched clients, by class (per-CPU array).
pub const MAP_CONNECT_STATS: &str = "CONNECT_STATS";
/// connect() results of watched clients by errno (per-CPU array).
pub const MAP_CONNECT_ERRNO: &str = "CONNECT_ERRNO";

/// Global: `offsetof(struct task_struct, fs)`.
pub const GLOBAL_OFF_TASK_FS: &str = "OFF_TASK_FS";
/// Global: `offsetof(struct task_struct, files)`.
pub const GLOBAL_OFF_TASK_FILES: &str = "OFF_TASK_FILES";
/// Global: `offsetof(struct fs_struct, pwd)` plus `offsetof(struct path, dentry)`.
pub const GLOBAL_OFF_FS_PWD_DENTRY: &str = "OFF_FS_PWD_DENTRY";
/// Global: `offsetof(struct dentry, d_sb)`.
pub const GLOBAL_OFF_DENTRY_SB: &str = "OFF_DENTRY_SB";
/// Global: `offsetof(struct super_block, s_dev)`.
pub const GLOBAL_OFF_SB_DEV: &str = "OFF_SB_DEV";
/// Global: `offsetof(struct files_struct, fdt)`.
pub const GLOBAL_OFF_FILES_FDT: &str = "OFF_FILES_FDT";
/// Global: `offsetof(struct fdtable, max_fds)`.
pub const GLOBAL_OFF_FDT_MAX_FDS: &str = "OFF_FDT_MAX_FDS";
/// Global: `offsetof(struct fdtable, fd)`.
pub const GLOBAL_OFF_FDT_FD: &str = "OFF_FDT_FD";
/// Global: `offsetof(struct file, f_inode)`.
pub const GLOBAL_OFF_FILE_INODE: &str = "OFF_FILE_INODE";
/// Global: `offsetof(struct inode, i_sb)`.
pub const GLOBAL_OFF_INODE_SB: &str = "OFF_INODE_SB";
/// Global: 1 when `sched_process_exit` has `group_dead` (its record's field, its raw
/// tracepoint's second argument).
pub const GLOBAL_EXIT_HAS_GROUP_DEAD: &str = "EXIT_HAS_GROUP_DEAD";
/// Global: `offsetof(struct file, private_data)` (the `struct socket` of a socket file).
pub const GLOBAL_OFF_FILE_PRIVATE: &str = "OFF_FILE_PRIVATE";
/// Global: `offsetof(struct socket, sk)`.
pub const GLOBAL_OFF_SOCKET_SK: &str = "OFF_SOCKET_SK";
/// Global: `offsetof(struct sock, sk_protocol)`.
pub const GLOBAL_OFF_SK_PROTOCOL: &str = "OFF_SK_PROTOCOL";
/// Global: `offsetof(struct sock_common, skc_net.net)`.
pub const GLOBAL_OFF_SK_NET: &str = "OFF_SK_NET";
/// Global: `offsetof(struct net, ns.inum)`.
pub const GLOBAL_OFF_NET_INUM: &str = "OFF_NET_INUM";
/// Global: `offsetof(struct sock_common, skc_num)` (the socket's own port, host order).
pub const GLOBAL_SERVED_OFF_SK_NUM: &str = "SERVED_OFF_SK_NUM";
/// Global of the TCP state program: `offsetof(struct inet_sock, inet_sport)`.
pub const GLOBAL_TCP_OFF_INET_SPORT: &str = "TCP_OFF_INET_SPORT";
/// Global of the TCP state program: `offsetof(struct sock_common, skc_dport)`.
pub const GLOBAL_TCP_OFF_SK_DPORT: &str = "TCP_OFF_SK_DPORT";
/// Global of the TCP state program: `offsetof(struct sock, sk_protocol)`.
pub const GLOBAL_TCP_OFF_SK_PROTOCOL: &str = "TCP_OFF_SK_PROTOCOL";
/// Global: `offsetof(struct tcp_sock, snd_nxt)`.
pub const GLOBAL_SERVED_OFF_TCP_SND_NXT: &str = "SERVED_OFF_TCP_SND_NXT";
/// Global: `offsetof(struct sk_buff, len)`.
pub const GLOBAL_SERVED_OFF_SKB_LEN: &str = "SERVED_OFF_SKB_LEN";
/// Global: `offsetof(struct sk_buff, data)`.
pub const GLOBAL_SERVED_OFF_SKB_DATA: &str = "SERVED_OFF_SKB_DATA";

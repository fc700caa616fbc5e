//! FUSE requests counted at the `fuse:fuse_request_send` tracepoint (kernel ≥ 6.13): the
//! filesystem operations a traced process really caused, measured at the filesystem.

/// Key of the `FUSE_OPS` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuseKey {
    /// The FUSE connection, as a kernel `dev_t` (the superblock's `s_dev`).
    pub dev: u32,
    /// `enum fuse_opcode`, with [`IN_PATH_CALL`] set when a traced path syscall (whose time
    /// the tracer measures) caused the request.
    pub opcode: u32,
}

/// Bit of [`FuseKey::opcode`]: the request was sent while the thread was inside a traced path
/// syscall (stat, openat, chdir...). The others come from calls the tracer does not time (read,
/// close, getdents...): a request's whole cost on the mount is the timed part scaled by all
/// requests over the timed ones.
pub const IN_PATH_CALL: u32 = 1 << 31;

#[cfg(feature = "user")]
unsafe impl aya::Pod for FuseKey {}

/// Requests of the traced processes already in flight on a connection when one more is sent,
/// capped: the `ahead` of [`FuseQueueKey`] counts 0..=FUSE_AHEAD_MAX, the last bucket "this
/// many or more".
pub const FUSE_AHEAD_MAX: u32 = 15;

/// Key of the `FUSE_SENT` map: one request in flight (`fuse:fuse_request_send` to
/// `fuse:fuse_request_end`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FuseReq {
    /// The connection (`dev_t`).
    pub dev: u32,
    /// Padding.
    pub _pad: u32,
    /// The request's `unique` id on that connection.
    pub unique: u64,
}

/// Value of the `FUSE_SENT` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuseSent {
    /// `bpf_ktime_get_ns` at send.
    pub ts_ns: u64,
    /// The traced processes' requests on the connection already in flight then (capped).
    pub ahead: u32,
    /// Padding.
    pub _pad: u32,
}

/// Key of the `FUSE_QUEUE` map: latency of the traced processes' requests to one connection,
/// by how many of theirs were already in flight when each was sent. A server that serves one
/// request at a time answers each after those ahead of it (latency grows with `ahead`); one
/// that serves several at once does not.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuseQueueKey {
    /// The connection (`dev_t`).
    pub dev: u32,
    /// Requests ahead at send, 0..=[`FUSE_AHEAD_MAX`].
    pub ahead: u32,
}

/// Value of the `FUSE_QUEUE` map (per CPU: summed in user space).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuseQueueVal {
    /// Requests answered.
    pub count: u64,
    /// Their summed latency, send to end, ns.
    pub sum_ns: u64,
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for FuseReq {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for FuseSent {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for FuseQueueKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for FuseQueueVal {}

/// Name of a FUSE opcode (include/uapi/linux/fuse.h).
pub fn opcode_name(op: u32) -> &'static str {
    match op & !IN_PATH_CALL {
        1 => "LOOKUP",
        2 => "FORGET",
        3 => "GETATTR",
        4 => "SETATTR",
        5 => "READLINK",
        6 => "SYMLINK",
        8 => "MKNOD",
        9 => "MKDIR",
        10 => "UNLINK",
        11 => "RMDIR",
        12 => "RENAME",
        13 => "LINK",
        14 => "OPEN",
        15 => "READ",
        16 => "WRITE",
        17 => "STATFS",
        18 => "RELEASE",
        20 => "FSYNC",
        21 => "SETXATTR",
        22 => "GETXATTR",
        23 => "LISTXATTR",
        24 => "REMOVEXATTR",
        25 => "FLUSH",
        26 => "INIT",
        27 => "OPENDIR",
        28 => "READDIR",
        29 => "RELEASEDIR",
        30 => "FSYNCDIR",
        31 => "GETLK",
        32 => "SETLK",
        33 => "SETLKW",
        34 => "ACCESS",
        35 => "CREATE",
        36 => "INTERRUPT",
        37 => "BMAP",
        38 => "DESTROY",
        39 => "IOCTL",
        40 => "POLL",
        41 => "NOTIFY_REPLY",
        42 => "BATCH_FORGET",
        43 => "FALLOCATE",
        44 => "READDIRPLUS",
        45 => "RENAME2",
        46 => "LSEEK",
        47 => "COPY_FILE_RANGE",
        48 => "SETUPMAPPING",
        49 => "REMOVEMAPPING",
        50 => "SYNCFS",
        51 => "TMPFILE",
        52 => "STATX",
        _ => "OTHER",
    }
}

//! Size and alignment of every type the kernel side and the user side share, checked at compile
//! time on both sides: a field added on one side only, or a padding change, fails the build
//! instead of misreading maps. Update a figure only together with the eBPF code that uses it.

use core::mem::{align_of, size_of};

use crate::{
    fuse::{FuseKey, FuseQueueKey, FuseQueueVal, FuseReq, FuseSent},
    offcpu::{OffKey, OffVal, ThreadSlot},
    paths::{Inflight, PathEvent, PathKey, PathStat},
    tcp::{ConnectInflight, ConnectStat},
};

macro_rules! layout {
    ($($t:ty: $size:literal, $align:literal;)*) => {
        $(const _: () = assert!(size_of::<$t>() == $size && align_of::<$t>() == $align);)*
    };
}

layout! {
    FuseKey: 8, 4;
    FuseReq: 16, 8;
    FuseSent: 16, 8;
    FuseQueueKey: 8, 4;
    FuseQueueVal: 16, 8;
    PathKey: 16, 8;
    PathStat: 488, 8;
    Inflight: 40, 8;
    PathEvent: 536, 8;
    ConnectInflight: 16, 8;
    ConnectStat: 480, 8;
    OffKey: 16, 8;
    OffVal: 16, 8;
    ThreadSlot: 64, 8;
}

//! The threads a target's runtime runs for itself (`TRACED_RUNTIME`): a JVM's compiler,
//! garbage collector and service threads, told by the names HotSpot gives them
//! ([`crate::host::runtime::JVM_OWN_THREADS`]). Their blocked time is not counted: a JIT
//! compiler thread woken when a method is queued for compiling waits on a futex the way a
//! worker queued on a contended lock does, and the periodic task thread's ticks end as a
//! request's `Thread.sleep` does; counted, they were the threads "waiting on a lock" of a
//! JVM whose pool of one worker capped it, and its "workers" (OpenJDK 17's
//! com.sun.net.httpserver: 9 workers, 2.6 threads on a lock). Their CPU time still counts: a
//! collector's or a compiler's cores are the server's cost.

use std::collections::{BTreeMap, HashMap, HashSet};

use trapdetect_common::offcpu::{ST_OFF_CPU, ThreadSlot};

use super::seconds::KernelSource;
use crate::host::runtime::{jvm_own_thread, maps_a_jvm};

/// The runtime threads found and marked so far.
#[derive(Debug, Default)]
pub struct RuntimeThreads {
    /// pid → whether it runs a JVM (read once per process).
    jvm: HashMap<u32, bool>,
    /// Threads already looked at.
    looked: HashSet<u32>,
    /// The marked threads alive at the last look, by tid, with their names (escaped).
    marked: HashMap<u32, String>,
    /// Every thread marked over the run, by name.
    counts: BTreeMap<String, usize>,
    /// Whether the source could not mark them (then their waits stay counted, and no more
    /// are looked for).
    unmarkable: bool,
}

impl RuntimeThreads {
    /// Looks at the threads of `pids` not looked at yet and marks the runtime's own in the
    /// kernel, before the second's reading, so their waits are left out from the first.
    pub fn update(&mut self, probes: &dyn KernelSource, pids: &[u32]) {
        if self.unmarkable {
            return;
        }
        let mut new: Vec<(u32, String)> = vec![];
        let mut present = HashSet::new();
        for &pid in pids {
            let jvm = *self.jvm.entry(pid).or_insert_with(|| {
                std::fs::read(format!("/proc/{pid}/maps")).is_ok_and(|m| maps_a_jvm(&m))
            });
            if !jvm {
                continue;
            }
            let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for e in rd.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                present.insert(tid);
                if self.looked.contains(&tid) {
                    continue;
                }
                let Ok(comm) = std::fs::read(e.path().join("comm")) else {
                    continue;
                };
                // A thread the JVM just started may not have its name yet: the launcher's
                // is looked at again next second.
                if comm != b"java\n" {
                    self.looked.insert(tid);
                }
                if jvm_own_thread(&comm) {
                    let name = comm.strip_suffix(b"\n").unwrap_or(&comm);
                    new.push((tid, crate::escape::bytes(name)));
                }
            }
        }
        // A thread that exited: its id may come back as another thread's (the kernel clears
        // the flag at the exit).
        self.looked.retain(|t| present.contains(t));
        self.marked.retain(|t, _| present.contains(t));
        if new.is_empty() {
            return;
        }
        let tids: Vec<u32> = new.iter().map(|(t, _)| *t).collect();
        if probes.mark_runtime(&tids) {
            for (_, name) in &new {
                *self.counts.entry(name.clone()).or_insert(0) += 1;
            }
            self.marked.extend(new);
        } else {
            self.unmarkable = true;
        }
    }

    /// Whether thread `tid` is one of the runtime's own, its waits not counted.
    pub fn contains(&self, tid: u32) -> bool {
        self.marked.contains_key(&tid)
    }

    /// `slots` as (the server's threads', the runtime's threads' not blocked now): the first
    /// are judged as workers; both split the time of intervals in progress (a runtime
    /// thread's wait has no time to split: the kernel adds none of it).
    pub fn split(&self, slots: Vec<ThreadSlot>) -> (Vec<ThreadSlot>, Vec<ThreadSlot>) {
        let (server, own): (Vec<ThreadSlot>, Vec<ThreadSlot>) =
            slots.into_iter().partition(|s| !self.contains(s.tid));
        (
            server,
            own.into_iter().filter(|s| s.state != ST_OFF_CPU).collect(),
        )
    }

    /// The threads marked over the run by name, with how many had it.
    pub fn by_name(&self) -> BTreeMap<String, usize> {
        self.counts.clone()
    }
}

/// `by_name` as text: "C1 CompilerThre, GC Thread#0, ...", a count after a name more than one
/// thread has.
pub fn listed(by_name: &BTreeMap<String, usize>) -> String {
    by_name
        .iter()
        .map(|(n, k)| {
            if *k > 1 {
                format!("{n} ×{k}")
            } else {
                n.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

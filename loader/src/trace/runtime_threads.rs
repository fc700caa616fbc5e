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

use super::seconds::KernelSource;
use crate::host::runtime::{jvm_own_thread, maps_a_jvm};

/// The runtime threads found and marked so far.
#[derive(Debug, Default)]
pub struct RuntimeThreads {
    /// pid → whether it runs a JVM (read once per process).
    jvm: HashMap<u32, bool>,
    /// Threads already looked at.
    looked: HashSet<u32>,
    /// The marked threads, by tid, with their names (escaped).
    marked: HashMap<u32, String>,
    /// Whether the source could mark them (the /proc sampling backend cannot).
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
        if new.is_empty() {
            return;
        }
        let tids: Vec<u32> = new.iter().map(|(t, _)| *t).collect();
        if probes.mark_runtime(&tids) {
            self.marked.extend(new);
        } else {
            self.unmarkable = true;
        }
    }

    /// Whether thread `tid` is one of the runtime's own, its waits not counted.
    pub fn contains(&self, tid: u32) -> bool {
        self.marked.contains_key(&tid)
    }

    /// The marked threads by name, with how many have it.
    pub fn by_name(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for n in self.marked.values() {
            *out.entry(n.clone()).or_insert(0) += 1;
        }
        out
    }
}

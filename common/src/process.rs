//! What a process or thread leaving means for the traced set, decided once for the kernel
//! side and unit-tested here: `sched_process_exit`'s record gained `group_dead` only in recent
//! kernels (6.1 and 6.12 end at `prio`), so the rule has to work with and without it.

/// What the exit probe does with the `TRACED` map for one `sched_process_exit` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitAction {
    /// Clear the exiting thread's own entry (threads are added by tid when cloned).
    pub forget_thread: bool,
    /// Clear the process's entry (`tgid`): the process left; counted as an exit.
    pub forget_process: bool,
}

/// Decides what an exit means. `group_dead` is the record's field where the kernel has it
/// (`None` where it does not): then the thread group leader's exit is taken as the process
/// leaving. That is exact for processes that end with `exit_group` (every server the tool
/// traces); a leader that calls `pthread_exit` while its other threads run stops their
/// tracing early, which the loader reports as a degraded probe.
#[inline(always)]
pub fn exit_action(tgid: u32, tid: u32, group_dead: Option<bool>) -> ExitAction {
    let leader = tid == tgid;
    ExitAction {
        forget_thread: !leader,
        forget_process: match group_dead {
            // The last thread may not be the leader (it can exit first and stay a zombie).
            Some(dead) => dead,
            None => leader,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_group_dead_the_last_thread_ends_the_process_whichever_it_is() {
        let a = exit_action(100, 100, Some(true));
        assert_eq!((a.forget_thread, a.forget_process), (false, true));
        // The leader left first; a worker thread is the last one.
        let a = exit_action(100, 104, Some(true));
        assert_eq!((a.forget_thread, a.forget_process), (true, true));
        let a = exit_action(100, 100, Some(false));
        assert_eq!((a.forget_thread, a.forget_process), (false, false));
        let a = exit_action(100, 104, Some(false));
        assert_eq!((a.forget_thread, a.forget_process), (true, false));
    }

    #[test]
    fn without_group_dead_the_leaders_exit_ends_the_process() {
        let a = exit_action(100, 100, None);
        assert_eq!((a.forget_thread, a.forget_process), (false, true));
        let a = exit_action(100, 104, None);
        assert_eq!((a.forget_thread, a.forget_process), (true, false));
    }
}

//! The benchmark's stack: the processes that serve the traced server without being traced.
//!
//! A process that wakes the server's threads from its system calls, often enough, hands it work
//! or answers (its front end, its upstreams, a FUSE daemon answering its lookups, the load
//! generator): a peer. The processes that wake a peer the same way serve the server too, one
//! link further: sshfs's ssh, the sshd and sftp-server behind it; php-fpm's database behind
//! nginx. Their CPU is the benchmark's, not the host's noise. `run` finds the chain link by
//! link while it samples: each second the wakers that pass the peer rule are marked in the
//! kernel (`TRACED_STACK`), whose program then counts who wakes them.

use std::collections::{BTreeMap, HashMap};

pub use crate::probe::offcpu::Wakeups;

/// Wakeups a second a waker must average to be a peer: a peer hands the server work many
/// times a second; a timer or a cron job's pipe does not.
pub const PEER_WAKEUPS_PER_S: f64 = 10.0;
/// Share of all counted wakeups a peer must have made (an interrupt-driven trickle from a
/// busy host stays under it).
pub const PEER_SHARE: f64 = 0.01;
/// The most processes the stack takes beyond the traced set (its kernel map is bounded too).
pub const STACK_MAX: usize = 64;

/// Whether `n` wakeups over `span_s` seconds, out of `total`, make a peer.
pub fn is_peer(n: u64, total: u64, span_s: f64) -> bool {
    span_s > 0.0 && n as f64 >= PEER_WAKEUPS_PER_S * span_s && n as f64 >= PEER_SHARE * total as f64
}

/// One process of the stack.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    /// 1: it woke the traced set; above: it woke a member (one more than the deepest member
    /// then).
    pub level: u8,
    /// Seconds into the sampling when it was found.
    pub at_s: f64,
    /// The member it woke most when it joined (none for level 1).
    pub via: Option<u32>,
}

/// The stack found so far.
#[derive(Clone, Debug, Default)]
pub struct Stack {
    /// Members by tgid.
    pub members: BTreeMap<u32, Member>,
}

impl Stack {
    /// Takes the wakeups counted so far (of the traced set since the start; of the members
    /// since each was marked) at `now_s` seconds into the sampling; returns the new members, to
    /// be marked in the kernel. A waker of the members is judged over the time since the first
    /// member was found (its count cannot have started earlier), so it joins a second later
    /// than a direct peer would, never on less evidence.
    pub fn promote(&mut self, w: &Wakeups, now_s: f64) -> Vec<u32> {
        let total = w.total();
        let first = self
            .members
            .values()
            .map(|m| m.at_s)
            .fold(f64::INFINITY, f64::min);
        let deepest = self.members.values().map(|m| m.level).max().unwrap_or(0);
        let mut new: Vec<(u32, u8)> = w
            .target_by_waker()
            .into_iter()
            .filter(|(_, n)| is_peer(*n, total, now_s))
            .map(|(p, _)| (p, 1))
            .collect();
        if first.is_finite() {
            new.extend(
                w.stack_by_waker()
                    .into_iter()
                    .filter(|(_, n)| is_peer(*n, total, now_s - first))
                    .map(|(p, _)| (p, deepest + 1)),
            );
        }
        new.sort_unstable();
        new.dedup_by_key(|(p, _)| *p);
        let mut out = vec![];
        for (pid, level) in new {
            if self.members.len() >= STACK_MAX {
                break;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = self.members.entry(pid) {
                let via = (level > 1).then(|| w.woke_most(pid)).flatten();
                e.insert(Member {
                    level,
                    at_s: now_s,
                    via,
                });
                out.push(pid);
            }
        }
        out
    }

    /// Whether `pid` is a member.
    pub fn contains(&self, pid: u32) -> bool {
        self.members.contains_key(&pid)
    }

    /// The members that woke the target's threads themselves (level 1) and hold `/dev/fuse`
    /// open: FUSE daemons serving a mount the target uses. Which mount the wakeups cannot say
    /// when the threads waited in a path walk (no device is known there, only for file I/O).
    pub fn fuse_daemons(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter(|(_, m)| m.level == 1)
            .map(|(p, _)| *p)
            .filter(|p| holds_dev_fuse(*p))
            .collect()
    }

    /// The filesystem each member serves, by pid: a peer most of whose wakeups of the traced
    /// threads ended their waits on one filesystem (a FUSE daemon answering their lookups and
    /// reads: `s_dev`), and the members that serve it, link by link (sshfs's ssh, the sshd
    /// behind it). Members that serve no filesystem are left out.
    pub fn serving_filesystems(&self, w: &Wakeups) -> HashMap<u32, u32> {
        let mut by_dev: HashMap<u32, HashMap<u32, u64>> = HashMap::new();
        for ((waker, dev), n) in &w.of_target {
            *by_dev.entry(*waker).or_default().entry(*dev).or_default() += n;
        }
        let root_dev = |pid: u32| -> Option<u32> {
            let devs = by_dev.get(&pid)?;
            let all: u64 = devs.values().sum();
            devs.iter()
                .filter(|(d, n)| **d != 0 && 2 * **n >= all)
                .map(|(d, _)| *d)
                .next()
        };
        let mut out = HashMap::new();
        for (&pid, m) in &self.members {
            // Follow `via` to the level-1 member it serves (a bounded walk: via links only
            // point to members found earlier).
            let (mut at, mut member) = (pid, *m);
            for _ in 0..STACK_MAX {
                match member
                    .via
                    .and_then(|v| self.members.get(&v).map(|n| (v, *n)))
                {
                    Some((v, n)) if member.level > 1 => (at, member) = (v, n),
                    _ => break,
                }
            }
            if member.level == 1
                && let Some(d) = root_dev(at)
            {
                out.insert(pid, d);
            }
        }
        out
    }
}

/// Whether process `pid` has `/dev/fuse` open (a FUSE daemon's channel to the kernel).
fn holds_dev_fuse(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| {
        d.flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == "/dev/fuse"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_rule_needs_the_rate_and_the_share() {
        // 10 a second over 3 s is 30.
        assert!(is_peer(30, 100, 3.0));
        assert!(!is_peer(29, 100, 3.0));
        // 1 % of 5,000 is 50: 30 wakeups among 5,000 are a trickle.
        assert!(!is_peer(30, 5_000, 3.0));
        assert!(is_peer(50, 5_000, 3.0));
        assert!(!is_peer(1_000, 1_000, 0.0));
    }

    fn w(target: &[(u32, u64)], stack: &[((u32, u32), u64)]) -> Wakeups {
        Wakeups {
            of_target: target.iter().map(|(p, n)| ((*p, 0), *n)).collect(),
            of_stack: stack.iter().copied().collect(),
        }
    }

    #[test]
    fn a_chain_joins_link_by_link_and_a_trickle_never() {
        // sshfs (100) wakes the server 2,000 times in the first second; pid 7 is a timer-ish
        // trickle (8 a second).
        let mut s = Stack::default();
        assert_eq!(s.promote(&w(&[(100, 2_000), (7, 8)], &[]), 1.0), vec![100]);
        assert_eq!(
            s.members[&100],
            Member {
                level: 1,
                at_s: 1.0,
                via: None
            }
        );
        // Second 2: ssh (200) has woken sshfs 1,900 times since it was marked; 9 more woke it
        // 5 times.
        let t2 = [(100, 4_000), (7, 16)];
        let two = w(&t2, &[((200, 100), 1_900), ((9, 100), 5)]);
        assert_eq!(s.promote(&two, 2.0), vec![200]);
        assert_eq!(
            s.members[&200],
            Member {
                level: 2,
                at_s: 2.0,
                via: Some(100)
            }
        );
        // Second 3: sshd (300) wakes ssh; already-known members are not returned again.
        let three = w(
            &t2,
            &[((200, 100), 3_800), ((300, 200), 1_000), ((9, 100), 10)],
        );
        assert_eq!(s.promote(&three, 3.0), vec![300]);
        assert_eq!(s.members[&300].level, 3);
        assert_eq!(s.members[&300].via, Some(200));
        assert!(!s.contains(7) && !s.contains(9));
        // A waker of the stack is judged over the time since the first member (2 s here):
        // 19 in 2 s is under 10 a second.
        let mut t = Stack::default();
        t.promote(&w(&[(100, 500)], &[]), 1.0);
        assert!(
            t.promote(&w(&[(100, 1_000)], &[((5, 100), 19)]), 3.0)
                .is_empty()
        );
        assert_eq!(
            t.promote(&w(&[(100, 1_000)], &[((5, 100), 20)]), 3.0),
            vec![5]
        );
    }

    #[test]
    fn the_chain_behind_a_daemon_that_answers_waits_on_a_filesystem_serves_it() {
        // sshfs (100): 1,800 of its 2,000 wakeups of the server ended waits on dev 42; nginx
        // (50) in front woke it 900 times from accept, never on a filesystem; ssh (200) woke
        // sshfs, sshd (300) woke ssh; a helper (400) woke nginx.
        let mut s = Stack::default();
        let mut first = w(&[(50, 900)], &[]);
        first.of_target.insert((100, 42), 1_800);
        first.of_target.insert((100, 0), 200);
        s.promote(&first, 1.0);
        let mut second = first.clone();
        second.of_stack = [((200, 100), 1_500), ((400, 50), 300)].into();
        s.promote(&second, 2.0);
        let mut third = second.clone();
        third.of_stack.insert((300, 200), 1_400);
        s.promote(&third, 3.0);
        assert_eq!(s.members.len(), 5);
        let serving = s.serving_filesystems(&third);
        assert_eq!(serving, [(100, 42), (200, 42), (300, 42)].into());
        // Half its wakeups on the filesystem is enough; less is not.
        let mut half = Stack::default();
        let mut h = w(&[], &[]);
        h.of_target.insert((100, 42), 500);
        h.of_target.insert((100, 0), 500);
        half.promote(&h, 1.0);
        assert_eq!(half.serving_filesystems(&h), [(100, 42)].into());
        h.of_target.insert((100, 0), 501);
        assert!(half.serving_filesystems(&h).is_empty());
    }

    #[test]
    fn the_stack_is_bounded() {
        let mut s = Stack::default();
        // 100 wakers of 1,000 each: each is 1 % of all.
        let many = Wakeups {
            of_target: (1..=100).map(|p| ((p, 0), 1_000)).collect(),
            of_stack: HashMap::new(),
        };
        assert_eq!(s.promote(&many, 1.0).len(), STACK_MAX);
        assert!(s.promote(&many, 2.0).is_empty());
        assert_eq!(s.members.len(), STACK_MAX);
    }
}

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
    /// 1: it woke the traced set; 2: it woke a process of level 1; and so on.
    pub level: u8,
    /// Seconds into the sampling when it was found.
    pub at_s: f64,
}

/// The stack found so far.
#[derive(Clone, Debug, Default)]
pub struct Stack {
    /// Members by tgid.
    pub members: BTreeMap<u32, Member>,
}

impl Stack {
    /// Takes the wakers counted so far (`wakers`: of the traced set since the start;
    /// `stack_wakers`: of the members since each was marked) at `now_s` seconds into the
    /// sampling; returns the new members, to be marked in the kernel. A waker of the members is
    /// judged over the time since the first member was found (its count cannot have started
    /// earlier), so it joins a second later than a direct peer would, never on less evidence.
    pub fn promote(
        &mut self,
        wakers: &HashMap<u32, u64>,
        stack_wakers: &HashMap<u32, u64>,
        now_s: f64,
    ) -> Vec<u32> {
        let total = wakers.values().sum::<u64>() + stack_wakers.values().sum::<u64>();
        let first = self
            .members
            .values()
            .map(|m| m.at_s)
            .fold(f64::INFINITY, f64::min);
        let deepest = self.members.values().map(|m| m.level).max().unwrap_or(0);
        let mut new: Vec<(u32, u8)> = wakers
            .iter()
            .filter(|(_, n)| is_peer(**n, total, now_s))
            .map(|(p, _)| (*p, 1))
            .collect();
        if first.is_finite() {
            new.extend(
                stack_wakers
                    .iter()
                    .filter(|(_, n)| is_peer(**n, total, now_s - first))
                    .map(|(p, _)| (*p, deepest + 1)),
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
                e.insert(Member { level, at_s: now_s });
                out.push(pid);
            }
        }
        out
    }

    /// Whether `pid` is a member.
    pub fn contains(&self, pid: u32) -> bool {
        self.members.contains_key(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(u32, u64)]) -> HashMap<u32, u64> {
        pairs.iter().copied().collect()
    }

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

    #[test]
    fn a_chain_joins_link_by_link_and_a_trickle_never() {
        // sshfs (100) wakes the server 2,000 times in the first second; pid 7 is a timer-ish
        // trickle (8 a second).
        let mut s = Stack::default();
        let w1 = m(&[(100, 2_000), (7, 8)]);
        assert_eq!(s.promote(&w1, &m(&[]), 1.0), vec![100]);
        assert_eq!(
            s.members[&100],
            Member {
                level: 1,
                at_s: 1.0
            }
        );
        // Second 2: ssh (200) has woken sshfs 1,900 times since it was marked; 9 more woke it
        // 5 times.
        let w2 = m(&[(100, 4_000), (7, 16)]);
        assert_eq!(s.promote(&w2, &m(&[(200, 1_900), (9, 5)]), 2.0), vec![200]);
        assert_eq!(
            s.members[&200],
            Member {
                level: 2,
                at_s: 2.0
            }
        );
        // Second 3: sshd (300) wakes ssh; already-known members are not returned again.
        let new = s.promote(&w2, &m(&[(200, 3_800), (300, 1_000), (9, 10)]), 3.0);
        assert_eq!(new, vec![300]);
        assert_eq!(s.members[&300].level, 3);
        assert!(!s.contains(7) && !s.contains(9));
        // A waker of the stack is judged over the time since the first member (2 s here):
        // 19 in 2 s is under 10 a second.
        let mut t = Stack::default();
        t.promote(&m(&[(100, 500)]), &m(&[]), 1.0);
        assert!(
            t.promote(&m(&[(100, 1_000)]), &m(&[(5, 19)]), 3.0)
                .is_empty()
        );
        assert_eq!(t.promote(&m(&[(100, 1_000)]), &m(&[(5, 20)]), 3.0), vec![5]);
    }

    #[test]
    fn the_stack_is_bounded() {
        let mut s = Stack::default();
        // 100 wakers of 1,000 each: each is 1 % of all.
        let many: HashMap<u32, u64> = (1..=100).map(|p| (p, 1_000)).collect();
        assert_eq!(s.promote(&many, &m(&[]), 1.0).len(), STACK_MAX);
        assert!(s.promote(&many, &m(&[]), 2.0).is_empty());
        assert_eq!(s.members.len(), STACK_MAX);
    }
}

//! Which server a user means when they name it instead of giving a pid: `--comm NAME`,
//! `--cgroup PATH`, `--container ID|NAME` (Docker, containerd, CRI-O, Podman: matched
//! through /proc/PID/cgroup, no runtime socket), `--unit NAME` (systemd). Each resolves to
//! the root of one process tree, which trapdetect then traces as it traces `--pid` (the
//! process and everything it forks). The matching is pure over a scan of /proc
//! ([`Candidate`]), so it is unit-tested on recorded files.

use std::path::Path;

/// What the user named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// A process name as /proc/PID/comm holds it (at most 15 bytes).
    Comm(String),
    /// A cgroup: its path as /proc/PID/cgroup shows it, or its directory under a cgroup mount.
    Cgroup(String),
    /// A container id (or a unique prefix of one), or a Docker/Podman container name.
    Container(String),
    /// A systemd unit (`nginx` means `nginx.service`).
    Unit(String),
}

impl Selector {
    /// The flag as the user wrote it, for messages (escaped).
    pub fn flag(&self) -> String {
        let (f, v) = match self {
            Selector::Comm(v) => ("--comm", v),
            Selector::Cgroup(v) => ("--cgroup", v),
            Selector::Container(v) => ("--container", v),
            Selector::Unit(v) => ("--unit", v),
        };
        format!("{f} {}", crate::escape::text(v))
    }
}

/// One process of the scan, with what the selectors match on.
#[derive(Clone, Debug, Default)]
pub struct Candidate {
    /// Pid (a process, not a thread).
    pub pid: u32,
    /// Parent pid.
    pub ppid: u32,
    /// `comm`, raw bytes.
    pub comm: Vec<u8>,
    /// Start time after boot, clock ticks (the oldest root is the one traced).
    pub start_ticks: u64,
    /// The paths of /proc/PID/cgroup, one per hierarchy line.
    pub cgroups: Vec<String>,
    /// The file names of its command line's first two words (/proc/PID/cmdline; the second
    /// unless it is an option): what an interpreter runs (`python3 /usr/bin/gunicorn`).
    pub argv_names: Vec<Vec<u8>>,
}

/// [`Candidate::argv_names`] from the bytes of /proc/PID/cmdline: the program's file name and
/// what it runs, its first argument unless that is an option (`python3 -m MODULE`: MODULE).
pub fn argv_names(cmdline: &[u8]) -> Vec<Vec<u8>> {
    let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let base = |w: &[u8]| w.rsplit(|&b| b == b'/').next().unwrap_or(w).to_vec();
    let mut out = vec![];
    if let Some(w) = words.first().filter(|w| !w.is_empty()) {
        out.push(base(w));
    }
    match words.get(1) {
        Some(&b"-m") => out.extend(words.get(2).filter(|w| !w.is_empty()).map(|w| base(w))),
        Some(w) if !w.is_empty() && w[0] != b'-' => out.push(base(w)),
        _ => {}
    }
    out
}

/// The process tree a selector names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The root traced (with everything it forks).
    pub pid: u32,
    /// How it was chosen, for the report and stderr (escaped).
    pub how: String,
}

/// Pids in the scan (`/proc`), with the fields the selectors need.
pub fn scan() -> Vec<Candidate> {
    super::process::scan()
        .into_iter()
        .map(|e| Candidate {
            pid: e.pid,
            ppid: e.stat.ppid,
            comm: e.stat.comm,
            start_ticks: e.stat.start_ticks,
            cgroups: std::fs::read_to_string(format!("/proc/{}/cgroup", e.pid))
                .map(|t| cgroup_paths(&t))
                .unwrap_or_default(),
            argv_names: std::fs::read(format!("/proc/{}/cmdline", e.pid))
                .map(|b| argv_names(&b))
                .unwrap_or_default(),
        })
        .collect()
}

/// The paths of a /proc/PID/cgroup file (`ID:CONTROLLERS:PATH` per line).
pub fn cgroup_paths(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .map(str::to_string)
        .collect()
}

/// Resolves a selector on this machine: the scan of /proc, the cgroup mounts (for a
/// `--cgroup` given as a directory), and the container runtimes' name files (for a
/// `--container` name).
pub fn resolve(sel: &Selector) -> Result<Resolved, String> {
    // Matched on the path /proc shows; said as the user wrote it.
    let matched = match sel {
        Selector::Cgroup(p) => Selector::Cgroup(cgroup_path(p, &cgroup_mounts())?),
        other => other.clone(),
    };
    let names = if let Selector::Container(c) = sel {
        container_names(Path::new("/"), c)
    } else {
        vec![]
    };
    resolve_as(&sel.flag(), &matched, &scan(), &names, std::process::id())
}

/// The roots of the cgroup hierarchies mounted here: (mount point, root within the
/// hierarchy), from /proc/self/mountinfo.
fn cgroup_mounts() -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return vec![];
    };
    let Ok(table) = super::mounts::MountTable::parse(&text) else {
        return vec![];
    };
    table
        .mounts
        .iter()
        .filter(|m| m.fs_type == "cgroup" || m.fs_type == "cgroup2")
        .map(|m| {
            (
                String::from_utf8_lossy(&m.mount_point).into_owned(),
                String::from_utf8_lossy(&m.root).into_owned(),
            )
        })
        .collect()
}

/// A `--cgroup` argument as the path /proc/PID/cgroup shows: a directory under a cgroup
/// mount loses the mount point (and gains the mount's root); a path not under one is taken
/// as a cgroup path already. The root cgroup holds every process: refused.
pub fn cgroup_path(arg: &str, mounts: &[(String, String)]) -> Result<String, String> {
    let trimmed = arg.trim_end_matches('/');
    let best = mounts
        .iter()
        .filter(|(mp, _)| trimmed == mp || trimmed.starts_with(&format!("{mp}/")))
        .max_by_key(|(mp, _)| mp.len());
    let path = match best {
        Some((mp, root)) => {
            let rest = &trimmed[mp.len()..];
            let root = root.trim_end_matches('/');
            format!("{root}{rest}")
        }
        None => trimmed.to_string(),
    };
    if path.is_empty() || path == "/" {
        return Err(format!(
            "--cgroup {}: the root cgroup holds every process; name the server's own cgroup",
            crate::escape::text(arg)
        ));
    }
    if !path.starts_with('/') {
        return Err(format!(
            "--cgroup {}: a cgroup path starts with / (as /proc/PID/cgroup shows it) or is a directory under a cgroup mount",
            crate::escape::text(arg)
        ));
    }
    Ok(path)
}

/// A container id in one component of a cgroup path: 64 hex digits, alone (`/docker/ID`,
/// Kubernetes' cgroupfs driver) or in a systemd scope (`docker-ID.scope`,
/// `cri-containerd-ID.scope`, `crio-ID.scope`, `libpod-ID.scope`). A runtime's monitor
/// (`crio-conmon-ID.scope`, `libpod-conmon-ID.scope`) is not the container.
pub fn container_id(component: &str) -> Option<&str> {
    if component.contains("conmon") {
        return None;
    }
    let stem = component.strip_suffix(".scope").unwrap_or(component);
    let id = stem.rsplit('-').next()?;
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The ids of containers named `name` by Docker (`/var/lib/docker/containers/ID/
/// config.v2.json`, `"Name": "/NAME"`) or Podman (`/var/lib/containers/storage/
/// overlay-containers/containers.json`, `"names"`), under `root`.
pub fn container_names(root: &Path, name: &str) -> Vec<String> {
    let mut ids = vec![];
    if let Ok(rd) = std::fs::read_dir(root.join("var/lib/docker/containers")) {
        for ent in rd.flatten() {
            if let Ok(text) = std::fs::read_to_string(ent.path().join("config.v2.json"))
                && let Some(id) = docker_config_named(&text, name)
            {
                ids.push(id);
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(
        root.join("var/lib/containers/storage/overlay-containers/containers.json"),
    ) {
        ids.extend(podman_named(&text, name));
    }
    ids.sort();
    ids.dedup();
    ids
}

/// A Docker `config.v2.json`'s id when its `Name` is `/name`.
pub fn docker_config_named(text: &str, name: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let n = v.get("Name")?.as_str()?;
    (n.trim_start_matches('/') == name.trim_start_matches('/'))
        .then(|| v.get("ID")?.as_str().map(str::to_string))
        .flatten()
}

/// The ids of Podman's `containers.json` entries that carry `name` among their `names`.
pub fn podman_named(text: &str, name: &str) -> Vec<String> {
    let Ok(serde_json::Value::Array(list)) = serde_json::from_str::<serde_json::Value>(text) else {
        return vec![];
    };
    list.iter()
        .filter(|c| {
            c.get("names")
                .and_then(|n| n.as_array())
                .is_some_and(|n| n.iter().any(|x| x.as_str() == Some(name)))
        })
        .filter_map(|c| c.get("id")?.as_str().map(str::to_string))
        .collect()
}

/// Whether a cgroup path is `dir` or beneath it.
fn within(path: &str, dir: &str) -> bool {
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The unit name systemd gives a bare name.
fn unit_name(name: &str) -> String {
    if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

/// The container ids a `--container` argument names, among those the scan shows: a name the
/// runtimes resolved (`named`), else a prefix of the ids.
fn container_ids(arg: &str, scan: &[Candidate], named: &[String]) -> Vec<String> {
    let mut seen: Vec<String> = scan
        .iter()
        .flat_map(|c| c.cgroups.iter())
        .flat_map(|p| p.split('/'))
        .filter_map(container_id)
        .map(str::to_string)
        .collect();
    seen.sort();
    seen.dedup();
    let by_name: Vec<String> = seen
        .iter()
        .filter(|id| named.iter().any(|n| n == *id))
        .cloned()
        .collect();
    if !by_name.is_empty() {
        return by_name;
    }
    let hex = !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return vec![];
    }
    let arg = arg.to_ascii_lowercase();
    seen.into_iter().filter(|id| id.starts_with(&arg)).collect()
}

/// The pure resolution: which processes of `scan` the selector names, and the root traced.
/// `named`: the container ids the runtimes' files give the argument as a name; `me`: our own
/// pid, never a target.
pub fn resolve_in(
    sel: &Selector,
    scan: &[Candidate],
    named: &[String],
    me: u32,
) -> Result<Resolved, String> {
    resolve_as(&sel.flag(), sel, scan, named, me)
}

/// [`resolve_in`], its messages naming the flag as `flag`.
fn resolve_as(
    flag: &str,
    sel: &Selector,
    scan: &[Candidate],
    named: &[String],
    me: u32,
) -> Result<Resolved, String> {
    let what;
    let members: Vec<&Candidate> = match sel {
        Selector::Comm(name) => {
            // The kernel keeps 15 bytes of a name.
            let want = &name.as_bytes()[..name.len().min(15)];
            let by_comm: Vec<&Candidate> = scan
                .iter()
                .filter(|c| c.comm == want && c.pid != me)
                .collect();
            if by_comm.is_empty() {
                // No comm: what an interpreter runs (Debian's gunicorn is `python3
                // /usr/bin/gunicorn`, its comm python3), as `pgrep -f` would find it.
                let by_argv: Vec<&Candidate> = scan
                    .iter()
                    .filter(|c| c.argv_names.iter().any(|a| a == name.as_bytes()))
                    .collect();
                what = format!(
                    "named {}{}",
                    crate::escape::text(name),
                    if by_argv.is_empty() {
                        ""
                    } else {
                        " (on its command line)"
                    }
                );
                by_argv
            } else {
                what = format!("named {}", crate::escape::text(name));
                by_comm
            }
        }
        Selector::Cgroup(dir) => {
            what = format!("in cgroup {}", crate::escape::text(dir));
            scan.iter()
                .filter(|c| c.cgroups.iter().any(|p| within(p, dir)))
                .collect()
        }
        Selector::Unit(name) => {
            let unit = unit_name(name);
            what = format!("in unit {}", crate::escape::text(&unit));
            scan.iter()
                .filter(|c| {
                    c.cgroups
                        .iter()
                        .any(|p| p.split('/').any(|comp| comp == unit))
                })
                .collect()
        }
        Selector::Container(arg) => match container_ids(arg, scan, named).as_slice() {
            [] => {
                what = "in a container with that id or name".to_string();
                vec![]
            }
            [id] => {
                what = format!("in container {}", &id[..12]);
                scan.iter()
                    .filter(|c| {
                        c.cgroups.iter().any(|p| {
                            p.split('/')
                                .any(|comp| container_id(comp) == Some(id.as_str()))
                        })
                    })
                    .collect()
            }
            many => {
                return Err(format!(
                    "{flag}: names {} containers ({}): give more of the id",
                    many.len(),
                    many.iter()
                        .take(5)
                        .map(|id| &id[..12])
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        },
    };
    let members: Vec<&Candidate> = members.into_iter().filter(|c| c.pid != me).collect();
    pick(flag, &what, members, matches!(sel, Selector::Comm(_)))
}

/// The root of the members' trees: a member whose parent is not one. Several roots: for a
/// name, separate servers (refused: which one is meant is the user's call); for a cgroup, a
/// unit or a container, the oldest is its main process (the others, `docker exec` sessions
/// or helpers, are named as not traced).
fn pick(
    flag: &str,
    what: &str,
    members: Vec<&Candidate>,
    refuse_several: bool,
) -> Result<Resolved, String> {
    if members.is_empty() {
        return Err(format!("{flag}: no process is running {what}"));
    }
    let pids: std::collections::HashSet<u32> = members.iter().map(|m| m.pid).collect();
    let is_member = |pid: u32| pids.contains(&pid);
    let mut roots: Vec<&Candidate> = members
        .iter()
        .copied()
        .filter(|m| !is_member(m.ppid))
        .collect();
    roots.sort_by_key(|r| (r.start_ticks, r.pid));
    let brief = |c: &Candidate| format!("pid {} ({})", c.pid, crate::escape::bytes(&c.comm));
    if refuse_several && roots.len() > 1 {
        return Err(format!(
            "{flag}: {} separate processes are {what} ({}{}); give the one to trace with --pid",
            roots.len(),
            roots
                .iter()
                .take(5)
                .map(|r| brief(r))
                .collect::<Vec<_>>()
                .join(", "),
            if roots.len() > 5 { ", …" } else { "" }
        ));
    }
    // Members form a forest; a cycle cannot happen (ppid is older), but keep a root anyway.
    let root = roots.first().copied().unwrap_or(members[0]);
    let tree = descendants_in(&members, root.pid);
    let mut how = format!(
        "{flag}: {}, the root of {} process{} {what}",
        brief(root),
        tree,
        if tree == 1 { "" } else { "es" }
    );
    let others: Vec<String> = roots[1.min(roots.len())..]
        .iter()
        .map(|r| brief(r))
        .collect();
    if !others.is_empty() {
        how.push_str(&format!(
            "; not traced, started later beside it: {}{}",
            others
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            if others.len() > 3 {
                format!(" and {} more", others.len() - 3)
            } else {
                String::new()
            }
        ));
    }
    Ok(Resolved { pid: root.pid, how })
}

/// How many of `members` are `root` or descend from it.
fn descendants_in(members: &[&Candidate], root: u32) -> usize {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            members
                .iter()
                .filter(|m| m.ppid == p && m.pid != p)
                .map(|m| m.pid),
        );
        i += 1;
    }
    tree.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID_A: &str = "3f2a9c0d4b5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
    const ID_B: &str = "3f2b000000000000000000000000000000000000000000000000000000000001";

    fn proc(pid: u32, ppid: u32, comm: &str, start: u64, cgroup_file: &str) -> Candidate {
        Candidate {
            pid,
            ppid,
            comm: comm.as_bytes().to_vec(),
            start_ticks: start,
            cgroups: cgroup_paths(cgroup_file),
            argv_names: vec![comm.as_bytes().to_vec()],
        }
    }

    /// A cgroup v1 host (as this machine: name=systemd, cpu, memory…) and its processes: an
    /// nginx with two workers in its unit, a second nginx elsewhere, a Docker container
    /// (systemd driver) whose init is a shell running gunicorn, with a later `docker exec`,
    /// CRI-O's monitor of another container, and a container on the cgroupfs driver.
    fn machine() -> Vec<Candidate> {
        let v1 = |path: &str| {
            format!("9:name=systemd:{path}\n4:memory:{path}\n1:cpu,cpuacct:{path}\n0::/\n")
        };
        let docker = format!("/system.slice/docker-{ID_A}.scope");
        vec![
            proc(1, 0, "systemd", 1, &v1("/init.scope")),
            proc(700, 1, "nginx", 500, &v1("/system.slice/nginx.service")),
            proc(701, 700, "nginx", 501, &v1("/system.slice/nginx.service")),
            proc(702, 700, "nginx", 501, &v1("/system.slice/nginx.service")),
            proc(
                900,
                1,
                "nginx",
                900,
                &v1("/user.slice/user-1000.slice/session-3.scope"),
            ),
            proc(
                1000,
                1,
                "containerd-shim",
                990,
                &v1("/system.slice/containerd.service"),
            ),
            proc(1001, 1000, "sh", 1000, &v1(&docker)),
            proc(1002, 1001, "gunicorn", 1001, &v1(&docker)),
            proc(1003, 1002, "gunicorn", 1002, &v1(&docker)),
            proc(1100, 1000, "bash", 1100, &v1(&docker)),
            proc(
                1200,
                1,
                "conmon",
                1200,
                &v1(&format!("/machine.slice/crio-conmon-{ID_B}.scope")),
            ),
            proc(1300, 1000, "node", 1300, &v1(&format!("/docker/{ID_B}"))),
        ]
    }

    fn resolve(sel: Selector) -> Result<Resolved, String> {
        resolve_in(&sel, &machine(), &[], 4242)
    }

    #[test]
    fn a_name_is_the_root_of_its_tree_and_two_trees_are_refused() {
        let m: Vec<Candidate> = machine().into_iter().filter(|c| c.pid != 900).collect();
        let r = resolve_in(&Selector::Comm("nginx".into()), &m, &[], 4242).unwrap();
        assert_eq!(r.pid, 700);
        assert_eq!(
            r.how,
            "--comm nginx: pid 700 (nginx), the root of 3 processes named nginx"
        );
        let e = resolve(Selector::Comm("nginx".into())).unwrap_err();
        assert_eq!(
            e,
            "--comm nginx: 2 separate processes are named nginx (pid 700 (nginx), pid 900 (nginx)); give the one to trace with --pid"
        );
        assert_eq!(
            resolve(Selector::Comm("apache2".into())).unwrap_err(),
            "--comm apache2: no process is running named apache2"
        );
    }

    #[test]
    fn a_name_no_comm_has_is_what_an_interpreter_runs() {
        let mut m = machine();
        for c in m.iter_mut().filter(|c| c.comm == b"gunicorn") {
            c.comm = b"python3".to_vec();
            c.argv_names = argv_names(b"/usr/bin/python3\0/usr/bin/gunicorn\0--workers\x002\0");
        }
        m.push(Candidate {
            pid: 1400,
            ppid: 1,
            comm: b"python3".to_vec(),
            start_ticks: 1400,
            cgroups: vec![],
            argv_names: argv_names(b"python3\0-m\0http.server\0"),
        });
        let r = resolve_in(&Selector::Comm("gunicorn".into()), &m, &[], 4242).unwrap();
        assert_eq!(r.pid, 1002);
        assert_eq!(
            r.how,
            "--comm gunicorn: pid 1002 (python3), the root of 2 processes named gunicorn (on its command line)"
        );
        // An option is not what runs; a comm that matches wins over the command line.
        assert!(resolve_in(&Selector::Comm("-m".into()), &m, &[], 4242).is_err());
        assert_eq!(
            argv_names(b"python3\0-m\0http.server\0"),
            vec![b"python3".to_vec(), b"http.server".to_vec()]
        );
        assert_eq!(
            argv_names(b"/usr/bin/node\0--max-old-space-size=64\0app.js\0"),
            vec![b"node".to_vec()]
        );
        let r = resolve_in(&Selector::Comm("nginx".into()), &m[..4], &[], 4242).unwrap();
        assert_eq!(r.pid, 700);
    }

    #[test]
    fn a_name_is_compared_as_the_kernel_keeps_it_and_never_names_us() {
        let m = vec![
            proc(10, 1, "php-fpm: master", 5, "0::/\n"),
            proc(11, 1, "trapdetect", 6, "0::/\n"),
        ];
        // `php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)` is cut to 15 bytes.
        let r = resolve_in(
            &Selector::Comm("php-fpm: master process".into()),
            &m,
            &[],
            11,
        )
        .unwrap();
        assert_eq!(r.pid, 10);
        assert!(resolve_in(&Selector::Comm("trapdetect".into()), &m, &[], 11).is_err());
    }

    #[test]
    fn a_unit_is_its_service_and_a_cgroup_holds_its_subtree() {
        let r = resolve(Selector::Unit("nginx".into())).unwrap();
        assert_eq!(r.pid, 700);
        assert_eq!(
            r.how,
            "--unit nginx: pid 700 (nginx), the root of 3 processes in unit nginx.service"
        );
        let r = resolve(Selector::Cgroup("/system.slice/nginx.service".into())).unwrap();
        assert_eq!(r.pid, 700);
        // A parent cgroup holds every tree below it: the oldest is traced, the others named.
        let r = resolve(Selector::Cgroup("/system.slice".into())).unwrap();
        assert_eq!(r.pid, 700);
        assert!(
            r.how.ends_with(
                "the root of 3 processes in cgroup /system.slice; not traced, started later beside it: pid 1000 (containerd-shim)"
            ),
            "{}",
            r.how
        );
        // A prefix of a name is not a parent.
        assert!(resolve(Selector::Cgroup("/system.slice/nginx".into())).is_err());
    }

    #[test]
    fn a_cgroup_directory_is_read_as_the_path_proc_shows() {
        let v1 = vec![
            ("/sys/fs/cgroup/systemd".to_string(), "/".to_string()),
            ("/sys/fs/cgroup/cpu".to_string(), "/".to_string()),
        ];
        assert_eq!(
            cgroup_path("/sys/fs/cgroup/systemd/system.slice/nginx.service/", &v1).unwrap(),
            "/system.slice/nginx.service"
        );
        // Inside a container, the mount's root is where it sits in the hierarchy.
        let inner = vec![("/sys/fs/cgroup".to_string(), "/kubepods/pod7".to_string())];
        assert_eq!(
            cgroup_path("/sys/fs/cgroup/app", &inner).unwrap(),
            "/kubepods/pod7/app"
        );
        assert_eq!(cgroup_path("/docker/abc", &v1).unwrap(), "/docker/abc");
        assert!(
            cgroup_path("/sys/fs/cgroup/systemd", &v1)
                .unwrap_err()
                .contains("root cgroup")
        );
        assert!(
            cgroup_path("docker/abc", &v1)
                .unwrap_err()
                .contains("starts with /")
        );
    }

    #[test]
    fn a_container_by_id_prefix_is_its_init_and_an_exec_is_named_not_traced() {
        let r = resolve(Selector::Container(ID_A[..12].to_string())).unwrap();
        assert_eq!(r.pid, 1001);
        assert_eq!(
            r.how,
            "--container 3f2a9c0d4b5e: pid 1001 (sh), the root of 3 processes in container 3f2a9c0d4b5e; not traced, started later beside it: pid 1100 (bash)"
        );
        // The cgroupfs driver's /docker/ID; CRI-O's monitor is not the container.
        let r = resolve(Selector::Container(ID_B[..8].to_string())).unwrap();
        assert_eq!(r.pid, 1300);
        assert!(
            r.how.contains("the root of 1 process in container"),
            "{}",
            r.how
        );
        // A prefix both ids share.
        assert_eq!(
            resolve(Selector::Container("3f2".into())).unwrap_err(),
            "--container 3f2: names 2 containers (3f2a9c0d4b5e, 3f2b00000000): give more of the id"
        );
        assert_eq!(
            resolve(Selector::Container("web".into())).unwrap_err(),
            "--container web: no process is running in a container with that id or name"
        );
        // A name the runtime's files resolved.
        let r = resolve_in(
            &Selector::Container("web".into()),
            &machine(),
            &[ID_A.to_string()],
            1,
        )
        .unwrap();
        assert_eq!(r.pid, 1001);
    }

    #[test]
    fn container_ids_in_each_runtimes_cgroup_names() {
        for comp in [
            format!("docker-{ID_A}.scope"),
            format!("cri-containerd-{ID_A}.scope"),
            format!("crio-{ID_A}.scope"),
            format!("libpod-{ID_A}.scope"),
            ID_A.to_string(),
        ] {
            assert_eq!(container_id(&comp), Some(ID_A), "{comp}");
        }
        for comp in [
            format!("crio-conmon-{ID_A}.scope"),
            format!("libpod-conmon-{ID_A}.scope"),
            "docker.service".to_string(),
            ID_A[..63].to_string(),
        ] {
            assert_eq!(container_id(&comp), None, "{comp}");
        }
    }

    #[test]
    fn container_names_from_docker_and_podman_files() {
        let docker = format!(
            r#"{{"StreamConfig":{{}},"State":{{"Running":true,"Pid":1001}},"ID":"{ID_A}","Name":"/web","Config":{{"Hostname":"3f2a9c0d4b5e"}}}}"#
        );
        assert_eq!(docker_config_named(&docker, "web"), Some(ID_A.to_string()));
        assert_eq!(docker_config_named(&docker, "/web"), Some(ID_A.to_string()));
        assert_eq!(docker_config_named(&docker, "db"), None);
        let podman = format!(
            r#"[{{"id":"{ID_A}","names":["web"],"image":"abc","layer":"def"}},{{"id":"{ID_B}","names":["db","db-alias"]}}]"#
        );
        assert_eq!(podman_named(&podman, "db-alias"), vec![ID_B.to_string()]);
        assert!(podman_named(&podman, "cache").is_empty());
        assert!(podman_named("not json", "web").is_empty());
        // Both stores under one root, read from the files.
        let root = std::env::temp_dir().join(format!("td-names-{}", std::process::id()));
        let d = root.join("var/lib/docker/containers").join(ID_A);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("config.v2.json"), &docker).unwrap();
        let p = root.join("var/lib/containers/storage/overlay-containers");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("containers.json"), &podman).unwrap();
        assert_eq!(container_names(&root, "web"), vec![ID_A.to_string()]);
        assert_eq!(container_names(&root, "db"), vec![ID_B.to_string()]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}

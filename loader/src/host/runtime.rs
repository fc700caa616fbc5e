//! The mode a server's runtime runs in (issue 23): the shared objects it mapped (PHP's Xdebug
//! and OPcache), the environment it was started with (/proc/PID/environ: NODE_ENV, RAILS_ENV,
//! FLASK_DEBUG, PYTHONDEVMODE, GODEBUG...), what its executable says about its build (Go's
//! race detector in the build info, a debug CPython's `d` ABI flag), and PHP's effective ini
//! files. Everything read from the target is untrusted bytes: values are escaped here, before
//! any rule or report sees them. Parsers are pure and tested on recorded files.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::Serialize;

/// Environment variables that select a runtime's mode; only these are kept (an environment
/// holds secrets: nothing else is read into the report).
pub const ENV_KEYS: &[&str] = &[
    "NODE_ENV",
    "NODE_OPTIONS",
    "RAILS_ENV",
    "RACK_ENV",
    "APP_ENV",
    "FLASK_DEBUG",
    "FLASK_ENV",
    "DJANGO_DEBUG",
    "DJANGO_SETTINGS_MODULE",
    "PYTHONDEVMODE",
    "PYTHONASYNCIODEBUG",
    "PYTHONMALLOC",
    "PYTHONTRACEMALLOC",
    "GODEBUG",
    "GOMAXPROCS",
    "GORACE",
    "XDEBUG_MODE",
];

/// What a process's runtime says about its mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Runtime {
    /// Pid.
    pub pid: u32,
    /// The executable's file name (escaped).
    pub exe_name: String,
    /// The mode-selecting variables of its initial environment, escaped (`None`: unreadable).
    pub env: Option<BTreeMap<String, String>>,
    /// Why the environment could not be read.
    pub env_error: Option<String>,
    /// File names of the shared objects it mapped (escaped, sorted, unique).
    pub libs: Vec<String>,
    /// Go build information, when the executable carries it.
    pub go: Option<GoBuild>,
}

impl Runtime {
    /// Whether a shared object whose file name starts with `prefix` is mapped.
    pub fn maps(&self, prefix: &str) -> bool {
        self.libs.iter().any(|l| l.starts_with(prefix))
    }

    /// `GOMAXPROCS` of a Go executable's initial environment, where it is a whole number of
    /// threads (Go ignores values below 1).
    pub fn go_maxprocs(&self) -> Option<u32> {
        self.go.as_ref()?;
        let n: u32 = self.env.as_ref()?.get("GOMAXPROCS")?.trim().parse().ok()?;
        (n >= 1).then_some(n)
    }

    /// The language the executable runs, from its name (what the rules need to know which
    /// variables apply).
    pub fn kind(&self) -> RuntimeKind {
        kind_of(&self.exe_name)
    }
}

/// The runtimes the rules know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// node, nodejs.
    Node,
    /// python, python3, python3.11, python3.11d, gunicorn... (an interpreter named python*).
    Python,
    /// ruby, puma, unicorn, rails.
    Ruby,
    /// php, php-fpm.
    Php,
    /// An executable with Go build information.
    Go,
    /// Anything else.
    Other,
}

/// The kind of runtime an executable's file name names.
pub fn kind_of(exe: &str) -> RuntimeKind {
    if exe == "node" || exe == "nodejs" {
        RuntimeKind::Node
    } else if exe.starts_with("python") || exe == "gunicorn" || exe == "uwsgi" {
        RuntimeKind::Python
    } else if exe.starts_with("ruby") || exe == "puma" || exe == "unicorn" {
        RuntimeKind::Ruby
    } else if exe.starts_with("php") {
        RuntimeKind::Php
    } else {
        RuntimeKind::Other
    }
}

/// The CPython ABI flags of a python executable's name: `python3.11d` is a debug build
/// (`Py_DEBUG`: every object carries reference-count checks; the ABI flag `d`).
pub fn cpython_debug(exe: &str, libs: &[String]) -> bool {
    let debug_name = |n: &str| {
        n.strip_prefix("python")
            .and_then(|v| v.strip_suffix('d'))
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    debug_name(exe)
        || libs.iter().any(|l| {
            l.strip_prefix("lib")
                .and_then(|l| l.split(".so").next())
                .is_some_and(debug_name)
        })
}

/// Splits /proc/PID/environ and keeps [`ENV_KEYS`], escaped.
pub fn parse_environ(b: &[u8]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for kv in b.split(|&c| c == 0) {
        let Some(eq) = kv.iter().position(|&c| c == b'=') else {
            continue;
        };
        let (k, v) = (&kv[..eq], &kv[eq + 1..]);
        if let Some(key) = ENV_KEYS.iter().find(|k2| k2.as_bytes() == k) {
            out.insert(key.to_string(), crate::escape::bytes(v));
        }
    }
    out
}

/// File names of the shared objects in /proc/PID/maps (`*.so`, `*.so.N`), escaped and sorted.
pub fn parse_maps(text: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for line in text.split(|&c| c == b'\n') {
        // address perms offset dev inode path: the path starts at the sixth field.
        let mut fields = 0;
        let mut i = 0;
        while i < line.len() && fields < 5 {
            while i < line.len() && line[i] != b' ' {
                i += 1;
            }
            while i < line.len() && line[i] == b' ' {
                i += 1;
            }
            fields += 1;
        }
        let path = &line[i.min(line.len())..];
        if path.first() != Some(&b'/') {
            continue;
        }
        // A library replaced on disk after it was mapped is still the one that runs.
        let path = path.strip_suffix(b" (deleted)").unwrap_or(path);
        let name = path.rsplit(|&c| c == b'/').next().unwrap_or(path);
        let is_so = name.ends_with(b".so") || name.windows(4).any(|w| w == b".so.");
        if is_so {
            let n = crate::escape::bytes(name);
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out.sort();
    out
}

/// What a Go executable's build information says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GoBuild {
    /// `go1.19.8`.
    pub version: String,
    /// Built with `-race` (the build setting `-race=true`).
    pub race: bool,
    /// The `build` settings (`-race=true`, `CGO_ENABLED=1`, `-gcflags=...`), escaped.
    pub settings: Vec<String>,
}

/// Reads a varint-prefixed string of Go's build info.
fn go_string(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (mut n, mut shift, mut i) = (0u64, 0, 0);
    loop {
        let c = *b.get(i)?;
        n |= u64::from(c & 0x7f) << shift;
        i += 1;
        if c & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    let n = usize::try_from(n).ok()?;
    let s = b.get(i..i.checked_add(n)?)?;
    Some((s, &b[i + n..]))
}

/// Parses the `.go.buildinfo` section of a Go 1.18+ executable (strings inline after the
/// 32-byte header, flag bit 2): the Go version and the module info's `build` lines.
pub fn parse_go_buildinfo(sec: &[u8]) -> Option<GoBuild> {
    const MAGIC: &[u8] = b"\xff Go buildinf:";
    if !sec.starts_with(MAGIC) || sec.len() < 32 || sec[15] & 2 == 0 {
        return None;
    }
    let (version, rest) = go_string(&sec[32..])?;
    let (modinfo, _) = go_string(rest)?;
    let settings: Vec<String> = modinfo
        .split(|&c| c == b'\n')
        .filter_map(|l| l.strip_prefix(b"build\t"))
        .map(crate::escape::bytes)
        .collect();
    Some(GoBuild {
        version: crate::escape::bytes(version),
        race: settings.iter().any(|s| s == "-race=true"),
        settings,
    })
}

/// The `.go.buildinfo` section of an executable (at most 64 KiB read), through the same capped
/// reader as the ELF headers.
fn go_buildinfo(path: &Path) -> Option<GoBuild> {
    use object::{Object, ObjectSection};
    let f = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(f);
    let file = object::File::parse(&cache).ok()?;
    let sec = file.section_by_name(".go.buildinfo")?;
    if sec.size() > 64 << 10 {
        return None;
    }
    parse_go_buildinfo(sec.data().ok()?)
}

/// Names HotSpot gives the threads a Java virtual machine runs for itself (as Linux keeps
/// them: the first 15 bytes), matched as prefixes: its VM thread and periodic task thread, the
/// garbage collectors' (G1, Parallel, ZGC, Shenandoah), the JIT compilers', and the JDK's
/// service threads (reference handling, finalization, cleaners, signals, the attach
/// listener, JFR). None of them serves a request: they wait for the runtime's own events (a
/// compiler thread for methods to compile, the periodic task thread for its next tick), so
/// their waits say nothing about the server's. Threads the application or a library starts
/// (a pool's `pool-1-thread-1`, `HTTP-Dispatcher`, Tomcat's `http-nio-8080-exec-1`) are not
/// here, nor is the launcher's `java`.
pub const JVM_OWN_THREADS: &[&[u8]] = &[
    b"VM Thread",
    b"VM Periodic Tas",
    b"GC Thread#",
    b"G1 ",
    b"ZDirector",
    b"ZDriver",
    b"ZStat",
    b"ZUncommitter",
    b"ZUnmapper",
    b"ZWorker",
    b"ZRuntimeWorker",
    b"RuntimeWorker#",
    b"Shenandoah",
    b"C1 CompilerThre",
    b"C2 CompilerThre",
    b"JVMCI",
    b"Sweeper thread",
    b"Service Thread",
    b"Monitor Deflati",
    b"Notification Th",
    b"Signal Dispatch",
    b"Reference Handl",
    b"Finalizer",
    b"Common-Cleaner",
    b"Attach Listener",
    b"JFR ",
];

/// Whether a thread named `comm` (/proc/PID/task/TID/comm, newline and all) of a JVM is one
/// the JVM runs for itself ([`JVM_OWN_THREADS`]).
pub fn jvm_own_thread(comm: &[u8]) -> bool {
    let name = comm.strip_suffix(b"\n").unwrap_or(comm);
    JVM_OWN_THREADS.iter().any(|p| name.starts_with(p))
}

/// Whether /proc/PID/maps text maps HotSpot's `libjvm.so` (whatever launched it: `java`, a
/// service wrapper, an embedding program).
pub fn maps_a_jvm(maps: &[u8]) -> bool {
    parse_maps(maps).iter().any(|l| l == "libjvm.so")
}

/// Reads the runtime facts of `pid`. Missing privileges leave parts empty (said in
/// `env_error`), never fail.
pub fn read(pid: u32) -> Runtime {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let exe_name = std::fs::read_link(proc.join("exe"))
        .ok()
        .and_then(|p| {
            let (p, _) = super::process::split_deleted(p.as_os_str().as_encoded_bytes());
            p.rsplit(|&c| c == b'/').next().map(crate::escape::bytes)
        })
        .unwrap_or_default();
    let (env, env_error) = match std::fs::read(proc.join("environ")) {
        Ok(b) => (Some(parse_environ(&b)), None),
        Err(e) => (
            None,
            Some(format!(
                "/proc/{pid}/environ: {e} (needs ptrace access: the same user, or CAP_SYS_PTRACE)"
            )),
        ),
    };
    let libs = std::fs::read(proc.join("maps"))
        .map(|b| parse_maps(&b))
        .unwrap_or_default();
    Runtime {
        pid,
        go: go_buildinfo(&proc.join("exe")),
        exe_name,
        env,
        env_error,
        libs,
    }
}

/// One ini setting and where it was set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IniValue {
    /// The value (escaped, quotes removed).
    pub value: String,
    /// `file:line`.
    pub at: String,
}

/// Parses PHP ini text into `into` (later files win, as PHP reads them).
pub fn parse_php_ini(text: &str, file: &str, into: &mut BTreeMap<String, IniValue>) {
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if l.is_empty() || l.starts_with(';') || l.starts_with('[') || l.starts_with('#') {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let v = v.split(" ;").next().unwrap_or(v).trim().trim_matches('"');
        into.insert(
            k.trim().to_string(),
            IniValue {
                value: crate::escape::text(v),
                at: format!("{file}:{}", i + 1),
            },
        );
    }
}

/// PHP's effective ini for a SAPI as Debian lays it out: `/etc/php/<ver>/<sapi>/php.ini`, then
/// `conf.d/*.ini` in name order (PHP_INI_SCAN_DIR); empty when the version is unknown.
pub fn read_php_ini(root: &Path, version: &str, sapi: &str) -> BTreeMap<String, IniValue> {
    let mut out = BTreeMap::new();
    if version.is_empty() {
        return out;
    }
    let base = root.join(format!("etc/php/{version}/{sapi}"));
    let main = base.join("php.ini");
    if let Ok(t) = std::fs::read_to_string(&main) {
        parse_php_ini(&t, &main.display().to_string(), &mut out);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(base.join("conf.d"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "ini"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    for f in files {
        if let Ok(t) = std::fs::read_to_string(&f) {
            parse_php_ini(&t, &f.display().to_string(), &mut out);
        }
    }
    out
}

/// The PHP version in an FPM or CLI executable's name (`php-fpm8.2` → `8.2`).
pub fn php_version(exe: &str) -> String {
    exe.trim_start_matches("php-fpm")
        .trim_start_matches("php")
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GOMAXPROCS counts only in a Go executable's environment, and only as a whole number of
    /// threads (Go ignores 0).
    #[test]
    fn gomaxprocs_is_read_from_a_go_executables_environment() {
        let rt = |go: bool, v: Option<&str>| Runtime {
            go: go.then(|| GoBuild {
                version: "go1.19.8".into(),
                ..Default::default()
            }),
            env: Some(
                v.map(|v| ("GOMAXPROCS".to_string(), v.to_string()))
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        };
        assert_eq!(rt(true, Some("1")).go_maxprocs(), Some(1));
        assert_eq!(rt(true, Some(" 4 ")).go_maxprocs(), Some(4));
        assert_eq!(rt(true, Some("auto")).go_maxprocs(), None);
        assert_eq!(rt(true, Some("0")).go_maxprocs(), None);
        assert_eq!(rt(true, None).go_maxprocs(), None);
        assert_eq!(rt(false, Some("1")).go_maxprocs(), None, "not a Go program");
    }

    #[test]
    fn environ_keeps_only_mode_variables_escaped() {
        let b = b"PATH=/usr/bin\0NODE_ENV=development\0SECRET=hunter2\0GODEBUG=gctrace=1\x1b\0=x\0junk\0";
        let e = parse_environ(b);
        assert_eq!(e.len(), 2);
        assert_eq!(e["NODE_ENV"], "development");
        assert_eq!(e["GODEBUG"], "gctrace=1\\x1b");
        assert!(!e.contains_key("SECRET"));
    }

    #[test]
    fn a_jvms_own_threads_are_told_from_the_servers() {
        // /proc/PID/task/*/comm of OpenJDK 17's java serving com.sun.net.httpserver with a
        // fixed pool of one (G1), recorded on this machine kind.
        let own = [
            "C1 CompilerThre",
            "C2 CompilerThre",
            "Common-Cleaner",
            "Finalizer",
            "G1 Conc#0",
            "G1 Main Marker",
            "G1 Refine#0",
            "G1 Service",
            "GC Thread#0",
            "Monitor Deflati",
            "Notification Th",
            "Reference Handl",
            "Service Thread",
            "Signal Dispatch",
            "Sweeper thread",
            "VM Periodic Tas",
            "VM Thread",
        ];
        let servers = [
            "HTTP-Dispatcher",
            "idle-timeout-ta",
            "java",
            "pool-1-thread-1",
        ];
        for n in own {
            assert!(jvm_own_thread(format!("{n}\n").as_bytes()), "{n}");
        }
        for n in servers {
            assert!(!jvm_own_thread(format!("{n}\n").as_bytes()), "{n}");
        }
        // Tomcat's and Jetty's request threads, ZGC's workers.
        assert!(!jvm_own_thread(b"http-nio-8080-e\n"));
        assert!(!jvm_own_thread(b"qtp1234567-15\n"));
        // OpenJDK 25's generational ZGC.
        for n in [
            "RuntimeWorker#0",
            "ZDirector",
            "ZDriverMajor",
            "ZUncommitter#0",
            "ZWorkerOld#0",
        ] {
            assert!(jvm_own_thread(format!("{n}\n").as_bytes()), "{n}");
        }
        let maps = b"55d0 r--p 00000000 08:01 1 /usr/lib/jvm/java-17-openjdk-amd64/bin/java\n\
7f00 r-xp 00000000 08:01 2 /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\n";
        assert!(maps_a_jvm(maps));
        assert!(!maps_a_jvm(
            b"7f00 r-xp 00000000 08:01 2 /usr/lib/libjvmti.so\n"
        ));
    }

    #[test]
    fn maps_list_shared_objects_once() {
        let t = b"55d0 r--p 00000000 08:01 1 /usr/sbin/php-fpm8.2\n\
7f00 r-xp 00000000 08:01 2                  /usr/lib/php/20220829/xdebug.so\n\
7f01 r--p 00000000 08:01 2                  /usr/lib/php/20220829/xdebug.so\n\
7f02 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
7f03 rw-p 00000000 00:00 0 [heap]\n\
7f04 r-xp 00000000 08:01 4 /tmp/odd name/opcache.so (deleted)\n";
        assert_eq!(parse_maps(t), ["libc.so.6", "opcache.so", "xdebug.so"]);
    }

    #[test]
    fn go_buildinfo_with_and_without_race() {
        let mk = |mods: &str| {
            let mut b = b"\xff Go buildinf:".to_vec();
            b.push(8);
            b.push(2);
            b.resize(32, 0);
            b.push(8);
            b.extend_from_slice(b"go1.19.8");
            b.push(mods.len() as u8);
            b.extend_from_slice(mods.as_bytes());
            b
        };
        let g = parse_go_buildinfo(&mk(
            "path\tsrv\nbuild\t-compiler=gc\nbuild\t-race=true\nbuild\tCGO_ENABLED=1\n",
        ))
        .unwrap();
        assert!(g.race);
        assert_eq!(g.version, "go1.19.8");
        assert_eq!(g.settings, ["-compiler=gc", "-race=true", "CGO_ENABLED=1"]);
        let g = parse_go_buildinfo(&mk("path\tsrv\nbuild\tCGO_ENABLED=0\n")).unwrap();
        assert!(!g.race);
        assert!(parse_go_buildinfo(b"\xff Go buildinf:").is_none());
        assert!(parse_go_buildinfo(b"not go at all, not go at all, not go").is_none());
    }

    #[test]
    fn kinds_and_debug_cpython() {
        assert_eq!(kind_of("node"), RuntimeKind::Node);
        assert_eq!(kind_of("python3.11"), RuntimeKind::Python);
        assert_eq!(kind_of("php-fpm8.2"), RuntimeKind::Php);
        assert!(cpython_debug("python3.11d", &[]));
        assert!(!cpython_debug("python3.11", &[]));
        assert!(cpython_debug("uwsgi", &["libpython3.11d.so.1.0".into()]));
        assert!(!cpython_debug("uwsgi", &["libpython3.11.so.1.0".into()]));
        assert_eq!(php_version("php-fpm8.2"), "8.2");
    }

    #[test]
    fn php_ini_later_files_win_with_their_place() {
        let mut m = BTreeMap::new();
        parse_php_ini("[opcache]\n; c\nopcache.enable=1\n", "/a.ini", &mut m);
        parse_php_ini(
            "opcache.enable = 0 ; off\nzend_extension=xdebug.so\n",
            "/b.ini",
            &mut m,
        );
        assert_eq!(m["opcache.enable"].value, "0");
        assert_eq!(m["opcache.enable"].at, "/b.ini:1");
        assert_eq!(m["zend_extension"].value, "xdebug.so");
    }

    #[test]
    fn this_process_has_an_environment_and_maps() {
        let r = read(std::process::id());
        assert!(r.env.is_some() && r.env_error.is_none());
        // The static musl build (`cargo xtask test`'s) maps no shared library at all.
        if cfg!(target_env = "musl") {
            assert!(r.libs.is_empty(), "{:?}", r.libs);
        } else {
            assert!(
                r.libs.iter().any(|l| l.starts_with("libc.so")),
                "{:?}",
                r.libs
            );
        }
        assert!(r.go.is_none());
    }
}

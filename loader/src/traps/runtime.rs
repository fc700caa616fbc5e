//! Runtime-mode traps (issue 23): a server whose runtime runs in a development or debugging
//! mode measures that mode, not the server. runtime.xdebug (PHP with Xdebug loaded),
//! runtime.opcache (PHP compiling every script on every request), runtime.dev-mode (a
//! framework or interpreter told to run in development mode by its environment: NODE_ENV,
//! RAILS_ENV, FLASK_DEBUG, PYTHONDEVMODE, GODEBUG...), runtime.debug-build (a Go binary built
//! with `-race`, a debug CPython), runtime.gomaxprocs (a Go server told to run on fewer CPUs
//! than it may use), runtime.nginx-log (nginx logging at `debug`, or per request to a slow
//! filesystem). Inputs are `host::runtime` observations, already escaped.

use std::collections::BTreeMap;

use super::{Finding, Id, Severity};
use crate::host::{
    mounts::MountTable,
    nginx::{LogDirective, NginxMaster},
    runtime::{IniValue, Runtime, RuntimeKind, cpython_debug},
};

/// Measured here (issue 23): a PHP loop of 3,000,000 function calls took 0.13-0.19 s with
/// `php -n`, 2.1-2.7 s with Xdebug 3.2 loaded in its default mode (`develop`), 0.13-0.29 s
/// with `xdebug.mode=off` (Debian's php8.2-xdebug, three runs each).
const XDEBUG_MEASURED: &str = "a PHP loop of 3,000,000 function calls took 2.1-2.7 s with Xdebug 3.2 loaded (mode develop) against 0.13-0.19 s without it (about 14×; measured on this project's test machine)";

/// runtime.xdebug: a PHP process with xdebug.so mapped. Fail unless its environment turns
/// every Xdebug mode off (`XDEBUG_MODE=off`), which leaves a small cost: a warning.
pub fn xdebug(r: &Runtime, ini_mode: Option<&IniValue>) -> Option<Finding> {
    if r.kind() != RuntimeKind::Php || !r.maps("xdebug.so") {
        return None;
    }
    let env_mode = r.env.as_ref().and_then(|e| e.get("XDEBUG_MODE")).cloned();
    // XDEBUG_MODE overrides xdebug.mode; Xdebug 3's default is `develop`.
    let mode = env_mode
        .clone()
        .or_else(|| ini_mode.map(|v| v.value.clone()))
        .unwrap_or_else(|| "develop".into());
    let off = mode.trim() == "off";
    let sev = if off { Severity::Warn } else { Severity::Fail };
    Some(
        Finding::new(
            Id::RuntimeXdebug,
            sev,
            format!(
                "pid {} ({}) runs with Xdebug loaded (xdebug.mode {mode}){}",
                r.pid,
                r.exe_name,
                if off { ": off, but still hooked into every call" } else { ": every function call is instrumented" }
            ),
        )
        .with("pid", r.pid as u64)
        .with("exe", r.exe_name.clone())
        .with("xdebug_mode", mode)
        .with_opt("xdebug_mode_set_at", env_mode.map(|_| "XDEBUG_MODE".to_string()).or_else(|| ini_mode.map(|v| v.at.clone())))
        .with("loaded", "xdebug.so")
        .predict(XDEBUG_MEASURED)
        .remedy("unload it for benchmarks: `phpdismod xdebug` (Debian) or remove the zend_extension=xdebug.so line, then restart php-fpm"),
    )
}

/// Whether an ini value is on (`1`, `on`, `yes`, `true`).
fn on(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "on" | "yes" | "true"
    )
}

/// runtime.opcache: PHP without OPcache (not loaded, or `opcache.enable = 0` in the effective
/// ini or the pool) compiles every script on every request; with it, `validate_timestamps` at
/// `revalidate_freq = 0` stats every included file on every request, which costs a round trip
/// each when the code is on a slow mount.
pub fn opcache(
    r: &Runtime,
    ini: &BTreeMap<String, IniValue>,
    code_on_slow_mount: Option<&str>,
) -> Option<Finding> {
    if r.kind() != RuntimeKind::Php {
        return None;
    }
    let base = |f: Finding| {
        f.with("pid", r.pid as u64)
            .with("exe", r.exe_name.clone())
            .with("opcache_loaded", r.maps("opcache.so"))
    };
    if !r.maps("opcache.so") {
        return Some(
            base(Finding::new(
                Id::RuntimeOpcache,
                Severity::Fail,
                format!("pid {} ({}) runs without OPcache: every request compiles its scripts again", r.pid, r.exe_name),
            ))
            .predict("PHP parses and compiles every script and include on every request (OPcache exists to remove that: php.net/opcache)")
            .remedy("install and enable OPcache (`apt install php8.2-opcache`; zend_extension=opcache.so, opcache.enable=1), then restart php-fpm"),
        );
    }
    if let Some(v) = ini.get("opcache.enable").filter(|v| !on(&v.value)) {
        return Some(
            base(Finding::new(
                Id::RuntimeOpcache,
                Severity::Fail,
                format!("pid {} ({}) has OPcache loaded but disabled (opcache.enable = {} at {}): every request compiles its scripts again", r.pid, r.exe_name, v.value, v.at),
            ))
            .with("opcache_enable", v.value.clone())
            .with("set_at", v.at.clone())
            .predict("PHP parses and compiles every script and include on every request")
            .remedy(format!("opcache.enable = 1 at {}, then restart php-fpm", v.at)),
        );
    }
    let validate = ini
        .get("opcache.validate_timestamps")
        .is_none_or(|v| on(&v.value));
    let freq0 = ini
        .get("opcache.revalidate_freq")
        .is_some_and(|v| v.value.trim() == "0");
    if let (true, true, Some(mount)) = (validate, freq0, code_on_slow_mount) {
        let at = ini
            .get("opcache.revalidate_freq")
            .map(|v| v.at.clone())
            .unwrap_or_default();
        return Some(
            base(Finding::new(
                Id::RuntimeOpcache,
                Severity::Warn,
                format!("pid {} ({}) revalidates every script on every request (opcache.validate_timestamps on, revalidate_freq 0 at {at}) and its code is on {mount}", r.pid, r.exe_name),
            ))
            .with("validate_timestamps", true)
            .with("revalidate_freq_s", 0u64)
            .with("set_at", at.clone())
            .with("code_mount", mount.to_string())
            .predict("one stat per script and include per request on the slow mount, each a round trip the kernel may not cache")
            .remedy(format!("opcache.validate_timestamps = 0 for the benchmark (or revalidate_freq = 2, PHP's default) at {at}, or move the code to a local filesystem")),
        );
    }
    None
}

/// A development-mode setting found in the environment.
struct DevSetting {
    var: &'static str,
    value: String,
    severity: Severity,
    effect: &'static str,
    remedy: String,
}

fn dev_settings(r: &Runtime) -> Vec<DevSetting> {
    let Some(env) = &r.env else {
        return vec![];
    };
    let get = |k: &str| env.get(k).map(|v| v.trim().to_string());
    let mut out = vec![];
    let kind = r.kind();
    let is_go = r.go.is_some();
    if kind == RuntimeKind::Node {
        match get("NODE_ENV") {
            Some(v) if v == "production" => {}
            v => out.push(DevSetting {
                var: "NODE_ENV",
                value: v.clone().unwrap_or_else(|| "(unset)".into()),
                severity: Severity::Warn,
                effect: "Express (and many Node frameworks) run in development mode unless NODE_ENV=production: view templates are read and compiled on every request, errors are verbose; Express's own guide says setting it alone can triple performance",
                remedy: "start the server with NODE_ENV=production".into(),
            }),
        }
        if let Some(v) = get("NODE_OPTIONS")
            .filter(|v| v.contains("--inspect") || v.contains("--prof") || v.contains("--cpu-prof"))
        {
            out.push(DevSetting {
                var: "NODE_OPTIONS",
                value: v,
                severity: Severity::Warn,
                effect: "the inspector or a profiler is on for every request",
                remedy:
                    "unset NODE_OPTIONS (or drop --inspect/--prof/--cpu-prof) for the benchmark"
                        .into(),
            });
        }
    }
    if kind == RuntimeKind::Ruby {
        for var in ["RAILS_ENV", "RACK_ENV"] {
            if let Some(v) = get(var).filter(|v| v == "development") {
                out.push(DevSetting {
                    var,
                    value: v,
                    severity: Severity::Fail,
                    effect: "Rails in development reloads changed code on every request, does not eager-load and caches nothing",
                    remedy: format!("start the server with {var}=production"),
                });
            }
        }
    }
    if kind == RuntimeKind::Python {
        python_framework_settings(&get, &mut out);
        python_interpreter_settings(&get, &mut out);
    }
    if is_go {
        go_settings(&get, &mut out);
    }
    out
}

/// Python web frameworks told to run in development mode (Flask, Django).
fn python_framework_settings(get: &dyn Fn(&str) -> Option<String>, out: &mut Vec<DevSetting>) {
    let truthy = |v: &str| !matches!(v, "" | "0" | "false" | "False" | "no");
    if let Some(v) = get("FLASK_DEBUG").filter(|v| truthy(v)) {
        out.push(DevSetting {
            var: "FLASK_DEBUG",
            value: v,
            severity: Severity::Fail,
            effect: "Flask's debug mode runs the Werkzeug debugger and the reloader",
            remedy: "unset FLASK_DEBUG".into(),
        });
    }
    if let Some(v) = get("FLASK_ENV").filter(|v| v == "development") {
        out.push(DevSetting {
            var: "FLASK_ENV",
            value: v,
            severity: Severity::Fail,
            effect: "FLASK_ENV=development turns Flask's debug mode on",
            remedy: "unset FLASK_ENV (or set it to production)".into(),
        });
    }
    if let Some(v) = get("DJANGO_DEBUG").filter(|v| truthy(v)) {
        out.push(DevSetting { var: "DJANGO_DEBUG", value: v, severity: Severity::Warn,
            effect: "a settings module that reads DJANGO_DEBUG turns DEBUG on: Django then keeps every SQL query of a request in memory and renders debug pages", remedy: "unset DJANGO_DEBUG and check settings.DEBUG is False".into() });
    }
    if let Some(v) = get("DJANGO_SETTINGS_MODULE").filter(|v| {
        let l = v.to_ascii_lowercase();
        l.split(['.', '_'])
            .any(|p| matches!(p, "dev" | "development" | "local" | "debug"))
    }) {
        out.push(DevSetting {
            var: "DJANGO_SETTINGS_MODULE",
            value: v,
            severity: Severity::Warn,
            effect: "a development settings module (DEBUG on as a rule)",
            remedy: "point DJANGO_SETTINGS_MODULE at the production settings".into(),
        });
    }
}

/// CPython's own development and debugging modes.
fn python_interpreter_settings(get: &dyn Fn(&str) -> Option<String>, out: &mut Vec<DevSetting>) {
    if let Some(v) = get("PYTHONDEVMODE").filter(|v| !v.is_empty()) {
        out.push(DevSetting { var: "PYTHONDEVMODE", value: v, severity: Severity::Fail,
            effect: "Python's development mode installs debug hooks on the memory allocators, enables asyncio's debug mode and extra runtime checks (its documentation: too expensive for production)", remedy: "unset PYTHONDEVMODE (and drop -X dev)".into() });
    }
    if let Some(v) = get("PYTHONASYNCIODEBUG").filter(|v| !v.is_empty()) {
        out.push(DevSetting {
            var: "PYTHONASYNCIODEBUG",
            value: v,
            severity: Severity::Fail,
            effect: "asyncio's debug mode checks every callback and logs slow ones",
            remedy: "unset PYTHONASYNCIODEBUG".into(),
        });
    }
    if let Some(v) = get("PYTHONMALLOC").filter(|v| v.contains("debug")) {
        out.push(DevSetting {
            var: "PYTHONMALLOC",
            value: v,
            severity: Severity::Fail,
            effect: "every allocation goes through the debug hooks",
            remedy: "unset PYTHONMALLOC".into(),
        });
    }
    if let Some(v) = get("PYTHONTRACEMALLOC").filter(|v| !v.is_empty() && v != "0") {
        out.push(DevSetting {
            var: "PYTHONTRACEMALLOC",
            value: v,
            severity: Severity::Fail,
            effect: "tracemalloc records a traceback for every allocation",
            remedy: "unset PYTHONTRACEMALLOC".into(),
        });
    }
}

/// GODEBUG settings that cost at run time (a Go binary only).
fn go_settings(get: &dyn Fn(&str) -> Option<String>, out: &mut Vec<DevSetting>) {
    const COSTLY: &[&str] = &[
        "gctrace",
        "schedtrace",
        "scheddetail",
        "allocfreetrace",
        "cgocheck=2",
        "efence",
        "gcstoptheworld",
        "clobberfree",
        "inittrace",
        "gccheckmark",
        "gcshrinkstackoff",
    ];
    if let Some(v) = get("GODEBUG") {
        let hits: Vec<&str> = v
            .split(',')
            .filter(|s| {
                let (k, val) = s.split_once('=').unwrap_or((s, "1"));
                val != "0" && COSTLY.iter().any(|c| *c == k || *c == *s)
            })
            .collect();
        if !hits.is_empty() {
            out.push(DevSetting {
                var: "GODEBUG",
                value: v.clone(),
                severity: Severity::Warn,
                effect: "runtime debugging (tracing to stderr, extra checks) is on",
                remedy: format!("drop {} from GODEBUG", hits.join(",")),
            });
        }
    }
}

/// runtime.gomaxprocs: a Go executable started with GOMAXPROCS below the CPUs it may use,
/// `cpus`: its usable CPUs, or a binding quota's where fewer. Only whole CPUs count: under a
/// 1.5-CPU quota GOMAXPROCS=1 is what Uber's automaxprocs sets, and no finding.
pub fn gomaxprocs(r: &Runtime, cpus: f64) -> Option<Finding> {
    let n = r.go_maxprocs()?;
    let whole = cpus.floor().max(1.0);
    if f64::from(n) >= whole {
        return None;
    }
    Some(
        Finding::new(
            Id::RuntimeGomaxprocs,
            Severity::Warn,
            format!(
                "pid {} ({}) runs Go with GOMAXPROCS={n} in its environment: goroutines run on at most {n} thread{} at once, of the {} CPUs it may use",
                r.pid,
                r.exe_name,
                if n == 1 { "" } else { "s" },
                super::round(cpus, 2)
            ),
        )
        .with("gomaxprocs", n)
        .with("cpus", super::round(cpus, 2))
        .with("exe", r.exe_name.clone())
        .predict(format!(
            "a CPU-bound server tops out at {n} of {whole} CPUs: run shows cpu.one-core (GOMAXPROCS=1) or CPUs left idle under a capped load"
        ))
        .remedy("unset GOMAXPROCS (Go then uses every CPU the process may use); under a CPU quota, set it to the quota's whole CPUs"),
    )
}

/// runtime.dev-mode: one finding per development setting in the server's environment.
/// /proc/PID/environ is the environment it was started with (what a harness controls); a
/// value the program sets for itself later is not seen.
pub fn dev_mode(r: &Runtime) -> Vec<Finding> {
    dev_settings(r)
        .into_iter()
        .map(|d| {
            Finding::new(
                Id::RuntimeDevMode,
                d.severity,
                if d.value == "(unset)" {
                    format!(
                        "pid {} ({}) runs without {} in its environment",
                        r.pid, r.exe_name, d.var
                    )
                } else {
                    format!(
                        "pid {} ({}) runs with {}={} in its environment",
                        r.pid, r.exe_name, d.var, d.value
                    )
                },
            )
            .with("pid", r.pid as u64)
            .with("exe", r.exe_name.clone())
            .with("variable", d.var)
            .with("value", d.value)
            .predict(d.effect)
            .remedy(d.remedy)
        })
        .collect()
}

/// runtime.debug-build: an executable built for debugging: Go's race detector (`-race`), a
/// debug CPython (`Py_DEBUG`, ABI flag `d`).
pub fn debug_build(r: &Runtime) -> Option<Finding> {
    if let Some(g) = r.go.as_ref().filter(|g| g.race) {
        return Some(
            Finding::new(
                Id::RuntimeDebugBuild,
                Severity::Fail,
                format!("pid {} ({}) is a Go binary built with -race ({})", r.pid, r.exe_name, g.version),
            )
            .with("pid", r.pid as u64)
            .with("exe", r.exe_name.clone())
            .with("build", "go -race")
            .with("go_version", g.version.clone())
            .with("go_build_settings", g.settings.clone())
            .predict("the race detector instruments every memory access: Go's documentation gives 5-10× the memory and 2-20× the execution time")
            .remedy("build the benchmarked binary without -race (`go build` as released)"),
        );
    }
    if r.kind() == RuntimeKind::Python && cpython_debug(&r.exe_name, &r.libs) {
        return Some(
            Finding::new(
                Id::RuntimeDebugBuild,
                Severity::Fail,
                format!("pid {} ({}) runs a debug build of CPython (Py_DEBUG, ABI flag d)", r.pid, r.exe_name),
            )
            .with("pid", r.pid as u64)
            .with("exe", r.exe_name.clone())
            .with("build", "cpython Py_DEBUG")
            .predict("a debug CPython checks reference counts and memory on every operation and is built without optimisation")
            .remedy("run the release interpreter (python3, not python3-dbg / python3.X-d)"),
        );
    }
    None
}

/// runtime.nginx-log: an nginx master whose configuration logs at `debug` (Debian's nginx is
/// built `--with-debug`: dozens of lines per request), or logs per request (`access_log`
/// without `buffer=`) to a slow or remote filesystem, where every request's write is a round
/// trip; an error log there is a warning (it is written on errors only).
pub fn nginx_log(m: &NginxMaster, mounts: &MountTable) -> Vec<Finding> {
    let mut out = vec![];
    let base = |f: Finding, d: &LogDirective| {
        f.with("pid", m.pid as u64)
            .with("conf", m.conf.clone())
            .with("directive", d.directive.clone())
            .with("args", d.args.clone())
            .with("at", d.at.clone())
    };
    for d in &m.logs {
        if d.directive == "error_log" && d.level() == "debug" {
            out.push(
                base(
                    Finding::new(
                        Id::RuntimeNginxLog,
                        Severity::Fail,
                        format!("nginx {} logs at debug level ({} at {})", m.pid, d.args.join(" "), d.at),
                    ),
                    d,
                )
                .predict("a debug log writes dozens of lines for every request: the run measures the logging")
                .remedy(format!("error_log {} error; at {} (or notice), then `nginx -s reload`", d.path().unwrap_or("<file>"), d.at)),
            );
        }
        let Some(path) = d.path() else {
            continue;
        };
        let Some(i) = mounts.mount_of(path.as_bytes()) else {
            continue;
        };
        let mt = &mounts.mounts[i];
        let Some(kind) = mt.slow_kind() else {
            continue;
        };
        let per_request = d.directive == "access_log" && !d.buffered();
        let sev = if per_request {
            Severity::Fail
        } else {
            Severity::Warn
        };
        out.push(
            base(
                Finding::new(
                    Id::RuntimeNginxLog,
                    sev,
                    format!(
                        "nginx {} writes its {} to {path} on {}{}",
                        m.pid,
                        d.directive.replace('_', " "),
                        kind.describe(),
                        if per_request { ", once per request" } else { "" }
                    ),
                ),
                d,
            )
            .with("path", path.to_string())
            .with("fs_type", crate::escape::text(&mt.fs_type))
            .with("mount_point", mt.mount_point_display())
            .with("buffered", d.buffered())
            .predict(if per_request {
                "every request's log line is a write on that filesystem: a round trip each, inside the request"
            } else {
                "writes on that filesystem are round trips; with buffer= or errors only they are rare"
            })
            .remedy(format!("log to a local filesystem (or `access_log off;` for the benchmark, or buffer=64k flush=1s) at {}", d.at)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::runtime::GoBuild;

    fn rt(exe: &str, env: &[(&str, &str)], libs: &[&str]) -> Runtime {
        Runtime {
            pid: 42,
            exe_name: exe.into(),
            env: Some(
                env.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            env_error: None,
            libs: libs.iter().map(|s| s.to_string()).collect(),
            go: None,
        }
    }

    #[test]
    fn xdebug_fails_unless_off() {
        let f = xdebug(&rt("php-fpm8.2", &[], &["opcache.so", "xdebug.so"]), None).unwrap();
        assert_eq!(
            (f.id.as_str(), f.severity),
            ("runtime.xdebug", Severity::Fail)
        );
        assert_eq!(f.evidence["xdebug_mode"], "develop");
        let f = xdebug(
            &rt("php-fpm8.2", &[("XDEBUG_MODE", "off")], &["xdebug.so"]),
            None,
        )
        .unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["xdebug_mode_set_at"], "XDEBUG_MODE");
        assert!(xdebug(&rt("php-fpm8.2", &[], &["opcache.so"]), None).is_none());
        assert!(xdebug(&rt("node", &[], &["xdebug.so"]), None).is_none());
    }

    #[test]
    fn opcache_missing_disabled_and_revalidating_on_a_slow_mount() {
        let mut ini = BTreeMap::new();
        let f = opcache(&rt("php-fpm8.2", &[], &[]), &ini, None).unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["opcache_loaded"], false);
        let php = rt("php-fpm8.2", &[], &["opcache.so"]);
        assert!(
            opcache(&php, &ini, Some("/mnt/c")).is_none(),
            "PHP's default revalidate_freq is 2 s"
        );
        ini.insert(
            "opcache.enable".into(),
            IniValue {
                value: "0".into(),
                at: "/etc/x.ini:3".into(),
            },
        );
        let f = opcache(&php, &ini, None).unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(
            f.remedy,
            "opcache.enable = 1 at /etc/x.ini:3, then restart php-fpm"
        );
        ini.insert(
            "opcache.enable".into(),
            IniValue {
                value: "1".into(),
                at: "/etc/x.ini:3".into(),
            },
        );
        ini.insert(
            "opcache.revalidate_freq".into(),
            IniValue {
                value: "0".into(),
                at: "/etc/x.ini:4".into(),
            },
        );
        assert!(opcache(&php, &ini, None).is_none());
        let f = opcache(&php, &ini, Some("/mnt/c (9p)")).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        ini.insert(
            "opcache.validate_timestamps".into(),
            IniValue {
                value: "0".into(),
                at: "/etc/x.ini:5".into(),
            },
        );
        assert!(opcache(&php, &ini, Some("/mnt/c (9p)")).is_none());
    }

    #[test]
    fn dev_modes_by_runtime() {
        let f = dev_mode(&rt("node", &[], &[]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].evidence["value"], "(unset)");
        assert_eq!(
            f[0].title,
            "pid 42 (node) runs without NODE_ENV in its environment"
        );
        assert_eq!(f[0].severity, Severity::Warn);
        assert!(dev_mode(&rt("node", &[("NODE_ENV", "production")], &[])).is_empty());
        // NODE_ENV means nothing to Python.
        assert!(dev_mode(&rt("python3.11", &[("NODE_ENV", "development")], &[])).is_empty());
        let f = dev_mode(&rt(
            "python3.11",
            &[
                ("PYTHONDEVMODE", "1"),
                ("DJANGO_SETTINGS_MODULE", "site.settings.dev"),
            ],
            &[],
        ));
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].evidence["variable"], "DJANGO_SETTINGS_MODULE");
        assert_eq!(f[1].severity, Severity::Fail);
        assert!(
            dev_mode(&rt(
                "python3",
                &[
                    ("FLASK_DEBUG", "0"),
                    ("DJANGO_SETTINGS_MODULE", "site.settings.production")
                ],
                &[]
            ))
            .is_empty()
        );
        assert_eq!(
            dev_mode(&rt("ruby", &[("RAILS_ENV", "development")], &[]))[0].severity,
            Severity::Fail
        );
        let mut go = rt("srv", &[("GODEBUG", "gctrace=1,madvdontneed=1")], &[]);
        assert!(
            dev_mode(&go).is_empty(),
            "not a Go binary as far as we know"
        );
        go.go = Some(GoBuild::default());
        let f = dev_mode(&go);
        assert_eq!(f[0].remedy, "drop gctrace=1 from GODEBUG");
        go.env = Some([("GODEBUG".to_string(), "gctrace=0".to_string())].into());
        assert!(dev_mode(&go).is_empty());
        // An unreadable environment says nothing (preflight lists the check as skipped).
        let mut n = rt("node", &[], &[]);
        n.env = None;
        assert!(dev_mode(&n).is_empty());
    }

    /// GOMAXPROCS below the whole CPUs the process may use: Caddy started with GOMAXPROCS=1
    /// on this 2-CPU machine (22,201 req/s on 1.01 cores under `run`, cpu.one-core).
    #[test]
    fn gomaxprocs_below_the_cpus_it_may_use() {
        let mut go = rt("caddy", &[("GOMAXPROCS", "1")], &[]);
        assert!(
            gomaxprocs(&go, 2.0).is_none(),
            "not a Go binary as far as we know"
        );
        go.go = Some(GoBuild::default());
        let f = gomaxprocs(&go, 2.0).unwrap();
        assert_eq!(
            (f.id.as_str(), f.severity),
            ("runtime.gomaxprocs", Severity::Warn)
        );
        assert_eq!(
            f.title,
            "pid 42 (caddy) runs Go with GOMAXPROCS=1 in its environment: goroutines run on at most 1 thread at once, of the 2 CPUs it may use"
        );
        assert_eq!(f.evidence["gomaxprocs"], 1);
        assert_eq!(f.evidence["cpus"], 2.0);
        // One CPU, or a 1.5-CPU quota (whole CPUs count: automaxprocs' choice): nothing.
        assert!(gomaxprocs(&go, 1.0).is_none());
        assert!(gomaxprocs(&go, 1.5).is_none());
        // Four threads on eight CPUs; as many as the CPUs: nothing.
        go.env = Some([("GOMAXPROCS".to_string(), "4".to_string())].into());
        assert!(
            gomaxprocs(&go, 8.0)
                .unwrap()
                .title
                .contains("at most 4 threads at once, of the 8 CPUs")
        );
        assert!(gomaxprocs(&go, 4.0).is_none());
        go.env = Some(BTreeMap::new());
        assert!(gomaxprocs(&go, 8.0).is_none(), "unset");
    }

    #[test]
    fn debug_builds() {
        let mut go = rt("srv", &[], &[]);
        go.go = Some(GoBuild {
            version: "go1.19.8".into(),
            race: true,
            settings: vec!["-race=true".into()],
        });
        let f = debug_build(&go).unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(
            f.title,
            "pid 42 (srv) is a Go binary built with -race (go1.19.8)"
        );
        go.go.as_mut().unwrap().race = false;
        assert!(debug_build(&go).is_none());
        assert!(debug_build(&rt("python3.11d", &[], &[])).is_some());
        assert!(debug_build(&rt("python3.11", &[], &[])).is_none());
    }

    #[test]
    fn nginx_debug_and_per_request_logs_on_a_slow_mount() {
        let t = MountTable::parse(
            "22 1 0:21 / / rw - ext4 /dev/vda1 rw\n90 22 0:60 / /mnt/c rw - 9p drvfs rw,aname=drvfs\n",
        )
        .unwrap();
        let d = |dir: &str, a: &[&str], line: usize| LogDirective {
            directive: dir.into(),
            args: a.iter().map(|s| s.to_string()).collect(),
            at: format!("/etc/nginx/nginx.conf:{line}"),
        };
        let m = NginxMaster {
            pid: 7,
            conf: "/etc/nginx/nginx.conf".into(),
            early_error_log: None,
            logs: vec![
                d("error_log", &["/var/log/nginx/error.log", "debug"], 3),
                d("access_log", &["/mnt/c/logs/access.log", "combined"], 9),
                d(
                    "access_log",
                    &["/mnt/c/logs/b.log", "combined", "buffer=64k"],
                    10,
                ),
                d("access_log", &["off"], 11),
                d("error_log", &["/var/log/nginx/error.log"], 12),
            ],
            unreadable: vec![],
        };
        let f = nginx_log(&m, &t);
        assert_eq!(f.len(), 3);
        assert_eq!(f[0].severity, Severity::Fail);
        assert_eq!(
            f[0].title,
            "nginx 7 logs at debug level (/var/log/nginx/error.log debug at /etc/nginx/nginx.conf:3)"
        );
        assert_eq!(f[1].severity, Severity::Fail);
        assert_eq!(f[1].evidence["fs_type"], "9p");
        assert!(f[1].title.ends_with(", once per request"));
        assert_eq!(f[2].severity, Severity::Warn);
        let quiet = NginxMaster {
            logs: vec![d("error_log", &["/var/log/nginx/error.log", "warn"], 1)],
            ..m
        };
        assert!(nginx_log(&quiet, &t).is_empty());
    }

    /// Every development setting dev_mode knows, pinned whole (titles, evidence, order).
    #[test]
    fn every_dev_setting_is_pinned() {
        let mut node = rt(
            "node",
            &[("NODE_OPTIONS", "--require x --inspect=9229")],
            &[],
        );
        node.go = Some(GoBuild::default());
        node.env.as_mut().unwrap().insert(
            "GODEBUG".into(),
            " gctrace=1,cgocheck=2,madvdontneed=1,schedtrace=0 ".into(),
        );
        let mut all = dev_mode(&node);
        all.extend(dev_mode(&rt("node", &[("NODE_ENV", "development")], &[])));
        all.extend(dev_mode(&rt(
            "ruby",
            &[("RAILS_ENV", "development"), ("RACK_ENV", "development")],
            &[],
        )));
        all.extend(dev_mode(&rt(
            "python3.11",
            &[
                ("FLASK_DEBUG", "1"),
                ("FLASK_ENV", "development"),
                ("DJANGO_DEBUG", "true"),
                ("DJANGO_SETTINGS_MODULE", "site.settings_local"),
                ("PYTHONDEVMODE", "1"),
                ("PYTHONASYNCIODEBUG", "1"),
                ("PYTHONMALLOC", "pymalloc_debug"),
                ("PYTHONTRACEMALLOC", "5"),
            ],
            &[],
        )));
        crate::traps::assert_pinned(
            &all,
            &[
                r##"{"id":"runtime.dev-mode","severity":"warn","title":"pid 42 (node) runs without NODE_ENV in its environment","evidence":{"pid":42,"exe":"node","variable":"NODE_ENV","value":"(unset)"},"predicted":"Express (and many Node frameworks) run in development mode unless NODE_ENV=production: view templates are read and compiled on every request, errors are verbose; Express's own guide says setting it alone can triple performance","remedy":"start the server with NODE_ENV=production"}"##,
                r##"{"id":"runtime.dev-mode","severity":"warn","title":"pid 42 (node) runs with NODE_OPTIONS=--require x --inspect=9229 in its environment","evidence":{"pid":42,"exe":"node","variable":"NODE_OPTIONS","value":"--require x --inspect=9229"},"predicted":"the inspector or a profiler is on for every request","remedy":"unset NODE_OPTIONS (or drop --inspect/--prof/--cpu-prof) for the benchmark"}"##,
                r##"{"id":"runtime.dev-mode","severity":"warn","title":"pid 42 (node) runs with GODEBUG=gctrace=1,cgocheck=2,madvdontneed=1,schedtrace=0 in its environment","evidence":{"pid":42,"exe":"node","variable":"GODEBUG","value":"gctrace=1,cgocheck=2,madvdontneed=1,schedtrace=0"},"predicted":"runtime debugging (tracing to stderr, extra checks) is on","remedy":"drop gctrace=1,cgocheck=2 from GODEBUG"}"##,
                r##"{"id":"runtime.dev-mode","severity":"warn","title":"pid 42 (node) runs with NODE_ENV=development in its environment","evidence":{"pid":42,"exe":"node","variable":"NODE_ENV","value":"development"},"predicted":"Express (and many Node frameworks) run in development mode unless NODE_ENV=production: view templates are read and compiled on every request, errors are verbose; Express's own guide says setting it alone can triple performance","remedy":"start the server with NODE_ENV=production"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (ruby) runs with RAILS_ENV=development in its environment","evidence":{"pid":42,"exe":"ruby","variable":"RAILS_ENV","value":"development"},"predicted":"Rails in development reloads changed code on every request, does not eager-load and caches nothing","remedy":"start the server with RAILS_ENV=production"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (ruby) runs with RACK_ENV=development in its environment","evidence":{"pid":42,"exe":"ruby","variable":"RACK_ENV","value":"development"},"predicted":"Rails in development reloads changed code on every request, does not eager-load and caches nothing","remedy":"start the server with RACK_ENV=production"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (python3.11) runs with FLASK_DEBUG=1 in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"FLASK_DEBUG","value":"1"},"predicted":"Flask's debug mode runs the Werkzeug debugger and the reloader","remedy":"unset FLASK_DEBUG"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (python3.11) runs with FLASK_ENV=development in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"FLASK_ENV","value":"development"},"predicted":"FLASK_ENV=development turns Flask's debug mode on","remedy":"unset FLASK_ENV (or set it to production)"}"##,
                r##"{"id":"runtime.dev-mode","severity":"warn","title":"pid 42 (python3.11) runs with DJANGO_DEBUG=true in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"DJANGO_DEBUG","value":"true"},"predicted":"a settings module that reads DJANGO_DEBUG turns DEBUG on: Django then keeps every SQL query of a request in memory and renders debug pages","remedy":"unset DJANGO_DEBUG and check settings.DEBUG is False"}"##,
                r##"{"id":"runtime.dev-mode","severity":"warn","title":"pid 42 (python3.11) runs with DJANGO_SETTINGS_MODULE=site.settings_local in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"DJANGO_SETTINGS_MODULE","value":"site.settings_local"},"predicted":"a development settings module (DEBUG on as a rule)","remedy":"point DJANGO_SETTINGS_MODULE at the production settings"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (python3.11) runs with PYTHONDEVMODE=1 in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"PYTHONDEVMODE","value":"1"},"predicted":"Python's development mode installs debug hooks on the memory allocators, enables asyncio's debug mode and extra runtime checks (its documentation: too expensive for production)","remedy":"unset PYTHONDEVMODE (and drop -X dev)"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (python3.11) runs with PYTHONASYNCIODEBUG=1 in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"PYTHONASYNCIODEBUG","value":"1"},"predicted":"asyncio's debug mode checks every callback and logs slow ones","remedy":"unset PYTHONASYNCIODEBUG"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (python3.11) runs with PYTHONMALLOC=pymalloc_debug in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"PYTHONMALLOC","value":"pymalloc_debug"},"predicted":"every allocation goes through the debug hooks","remedy":"unset PYTHONMALLOC"}"##,
                r##"{"id":"runtime.dev-mode","severity":"fail","title":"pid 42 (python3.11) runs with PYTHONTRACEMALLOC=5 in its environment","evidence":{"pid":42,"exe":"python3.11","variable":"PYTHONTRACEMALLOC","value":"5"},"predicted":"tracemalloc records a traceback for every allocation","remedy":"unset PYTHONTRACEMALLOC"}"##,
            ],
        );
    }
}

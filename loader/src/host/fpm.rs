//! PHP-FPM as it is configured and as it runs: the pool configuration parsed the way FPM parses
//! it (`include=` globs relative to the prefix, `[pool]` sections, `;` comments, `$pool`
//! substitution, `pm.*`, `listen`), each value with the file and line it came from; the
//! running masters found by process name, with their workers' resident memory largest first.
//! FPM never multiplies max_children by what a worker holds; the rules in `traps::fpm` do.

use std::{
    collections::BTreeMap,
    ffi::{CStr, CString},
    fmt,
    io::{self, Read, Seek, SeekFrom},
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

use serde::Serialize;

use super::process::{self, ProcEntry};

/// FPM's compiled-in prefix on Debian (`PHP_PREFIX`): relative `include=` and relative unix
/// socket paths are resolved against it unless the pool or `-p` sets another.
pub const DEFAULT_PREFIX: &str = "/usr";

/// `sizeof(sockaddr_un.sun_path)` on Linux, including the terminating NUL.
pub const SUN_PATH_LEN: usize = 108;

/// A configuration error FPM would also refuse, with the place it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.what)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.what)
        }
    }
}

/// One `key = value` and where it was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Directive {
    /// The value after quote removal and `$pool` substitution.
    pub value: String,
    /// The file.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
}

impl Directive {
    /// `file:line`.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// A `[pool]` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolConfig {
    /// Pool name.
    pub name: String,
    /// Where the section starts.
    pub file: PathBuf,
    /// Line of the `[name]` header.
    pub line: usize,
    /// Directives by key (`pm.max_children`, `php_admin_value[memory_limit]`...).
    pub directives: BTreeMap<String, Directive>,
}

/// A whole FPM configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FpmConfig {
    /// The main file.
    pub main: PathBuf,
    /// Every file read, in order.
    pub files: Vec<PathBuf>,
    /// `[global]` directives.
    pub global: BTreeMap<String, Directive>,
    /// Pools, in order of first appearance.
    pub pools: Vec<PoolConfig>,
    /// Things FPM would only warn about (an include pattern that matches nothing).
    pub warnings: Vec<String>,
}

/// A parsed line of an FPM ini file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IniLine {
    /// `[name]`.
    Section(String),
    /// `key = value`.
    Entry(String, String),
}

/// Parses one line the way PHP's ini scanner treats FPM files: `;` starts a comment outside
/// double quotes, values may be double-quoted, a bare word with no `=` is refused (FPM says
/// "value is NULL for a ZEND_INI_PARSER_ENTRY"), an unclosed `[` is a syntax error.
pub fn parse_line(raw: &str) -> Result<Option<IniLine>, String> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
        return Ok(None);
    }
    if let Some(rest) = line.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err("syntax error: `[` without a closing `]`".into());
        };
        let name = rest[..end].trim();
        let after = rest[end + 1..].trim();
        if !after.is_empty() && !after.starts_with(';') {
            return Err(format!(
                "syntax error: unexpected `{after}` after the section header"
            ));
        }
        if name.is_empty() {
            return Err("syntax error: empty section name".into());
        }
        return Ok(Some(IniLine::Section(name.to_string())));
    }
    let Some(eq) = line.find('=') else {
        // Echo the line only when it looks like a key: an include of a file that is not an
        // FPM config (a secret) must not print its content.
        let looks_like_key = line.len() <= 64
            && line
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c));
        return Err(if looks_like_key {
            format!("`{line}` has no `=` (FPM: value is NULL for a ZEND_INI_PARSER_ENTRY)")
        } else {
            "a line with no `=`: not an FPM configuration".to_string()
        });
    };
    let key = line[..eq].trim();
    if key.is_empty() {
        return Err("syntax error: `=` without a key".into());
    }
    if key.contains(char::is_whitespace) {
        return Err("syntax error: a key containing whitespace".to_string());
    }
    if key.contains('[') != key.ends_with(']') {
        return Err(format!("syntax error: unbalanced brackets in `{key}`"));
    }
    let value = unquote(line[eq + 1..].trim())?;
    Ok(Some(IniLine::Entry(key.to_string(), value)))
}

/// Strips a trailing comment and the quotes of a value.
fn unquote(v: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut in_quotes = false;
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => in_quotes = !in_quotes,
            '\\' if in_quotes => {
                // Inside double quotes PHP keeps backslashes except before a quote.
                if chars.peek() == Some(&'"') {
                    out.push('"');
                    chars.next();
                } else {
                    out.push('\\');
                }
            }
            ';' if !in_quotes => break,
            c => out.push(c),
        }
    }
    if in_quotes {
        return Err("syntax error: unterminated double quote".into());
    }
    // Unquoted parts keep inner spaces but not trailing ones (before a comment).
    let t = out.trim_end();
    // ini booleans as PHP's parser normalises them (FPM then reads "1" or "").
    Ok(match t.to_ascii_lowercase().as_str() {
        "yes" | "on" | "true" if !v.starts_with('"') => "1".into(),
        "no" | "off" | "false" | "none" if !v.starts_with('"') => "".into(),
        _ => t.to_string(),
    })
}

/// Expands `${VAR}` from the environment (PHP's ini syntax) and `$pool`.
fn expand(value: &str, pool: Option<&str>) -> Result<String, String> {
    let mut v = value.to_string();
    while let Some(i) = v.find("${") {
        let Some(end) = v[i..].find('}') else {
            break;
        };
        let name = &v[i + 2..i + end];
        let val = std::env::var(name).unwrap_or_default();
        v.replace_range(i..i + end + 1, &val);
    }
    if v.contains("$pool") {
        match pool {
            Some(p) => v = v.replace("$pool", p),
            None => return Err("Can't use '$pool' when the pool is not defined".into()),
        }
    }
    Ok(v)
}

/// Reads, includes and parses an FPM configuration.
pub fn load(main: &Path, prefix: &str) -> Result<FpmConfig, ConfigError> {
    let mut cfg = FpmConfig {
        main: main.to_path_buf(),
        ..Default::default()
    };
    let mut section: Option<usize> = None;
    let mut global = true;
    load_file(main, prefix, &mut cfg, &mut section, &mut global, 0)?;
    if cfg.pools.is_empty() {
        return Err(ConfigError {
            file: main.to_path_buf(),
            line: 0,
            what: "no pool defined: at least one pool section must be specified (FPM refuses to start)"
                .into(),
        });
    }
    // FPM's refusals that leave nothing to check (its words, at the pool's header line); the
    // spare-server rules are findings (`fpm.spare-servers`).
    for p in &cfg.pools {
        let refuse = |what: String| ConfigError {
            file: p.file.clone(),
            line: p.line,
            what: format!("{what} (FPM refuses to start)"),
        };
        let n = &p.name;
        if p.directives
            .get("listen")
            .is_none_or(|d| d.value.is_empty())
        {
            return Err(refuse(format!(
                "[pool {n}] no listen address have been defined!"
            )));
        }
        if !p.directives.contains_key("pm") {
            return Err(refuse(format!(
                "[pool {n}] the process manager is missing (static, dynamic or ondemand)"
            )));
        }
        let mc = p
            .directives
            .get("pm.max_children")
            .and_then(|d| parse_int(&d.value).ok())
            .unwrap_or(0);
        if mc < 1 {
            return Err(refuse(format!(
                "[pool {n}] pm.max_children must be a positive value"
            )));
        }
    }
    Ok(cfg)
}

fn load_file(
    path: &Path,
    prefix: &str,
    cfg: &mut FpmConfig,
    section: &mut Option<usize>,
    global: &mut bool,
    depth: usize,
) -> Result<(), ConfigError> {
    let err = |line: usize, what: String| ConfigError {
        file: path.to_path_buf(),
        line,
        what,
    };
    if depth > 16 {
        return Err(err(0, "includes nested more than 16 deep (a loop?)".into()));
    }
    let bytes = crate::input::read_capped_io(path, crate::input::FPM_CONFIG_CAP)
        .map_err(|e| err(0, e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| err(0, "not UTF-8 text".into()))?;
    cfg.files.push(path.to_path_buf());
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let Some(item) = parse_line(raw).map_err(|w| err(line, w))? else {
            continue;
        };
        match item {
            IniLine::Section(name) => {
                if name == "global" {
                    *global = true;
                    *section = None;
                    continue;
                }
                *global = false;
                // A second section with an existing pool's name continues that pool, as FPM does.
                match cfg.pools.iter().position(|p| p.name == name) {
                    Some(i) => *section = Some(i),
                    None => {
                        cfg.pools.push(PoolConfig {
                            name,
                            file: path.to_path_buf(),
                            line,
                            directives: BTreeMap::new(),
                        });
                        *section = Some(cfg.pools.len() - 1);
                    }
                }
            }
            IniLine::Entry(key, value) => {
                let pool_name = section.map(|i| cfg.pools[i].name.clone());
                let value = expand(&value, pool_name.as_deref()).map_err(|w| err(line, w))?;
                if key == "include" {
                    include(&value, prefix, path, line, cfg, section, global, depth)?;
                    continue;
                }
                let d = Directive {
                    value,
                    file: path.to_path_buf(),
                    line,
                };
                validate_value(&key, &d.value).map_err(|w| err(line, w))?;
                let in_pool = section.is_some() && !*global;
                known_key(&key, in_pool).map_err(|w| err(line, w))?;
                match section {
                    Some(i) if !*global => {
                        cfg.pools[*i].directives.insert(key, d);
                    }
                    _ => {
                        cfg.global.insert(key, d);
                    }
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn include(
    pattern: &str,
    prefix: &str,
    from: &Path,
    line: usize,
    cfg: &mut FpmConfig,
    section: &mut Option<usize>,
    global: &mut bool,
    depth: usize,
) -> Result<(), ConfigError> {
    let full = if pattern.starts_with('/') {
        pattern.to_string()
    } else {
        format!("{prefix}/{pattern}")
    };
    let paths = glob(&full).map_err(|e| ConfigError {
        file: from.to_path_buf(),
        line,
        what: format!(
            "include = {pattern}: unable to globalize '{full}': {e} (FPM refuses to start)"
        ),
    })?;
    if paths.is_empty() {
        cfg.warnings.push(format!(
            "{}:{line}: nothing matches the include pattern '{full}'",
            from.display()
        ));
    }
    for p in paths {
        load_file(&p, prefix, cfg, section, global, depth + 1)?;
    }
    Ok(())
}

/// glob(3) with FPM's flags (`GLOB_ERR | GLOB_MARK`), directories skipped as FPM skips them.
/// libc: nix has no glob, and FPM's own matching is glob(3)'s.
pub fn glob(pattern: &str) -> io::Result<Vec<PathBuf>> {
    /// The results, freed once on every way out.
    struct Glob(libc::glob_t);
    impl Drop for Glob {
        fn drop(&mut self) {
            // SAFETY: the glob_t is all-zero or filled by glob(); it is freed only here.
            unsafe { libc::globfree(&mut self.0) };
        }
    }
    let c = CString::new(pattern).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero glob_t is the empty one glob() expects and globfree() accepts.
    let mut g = Glob(unsafe { std::mem::zeroed() });
    // SAFETY: `c` is NUL-terminated and `g.0` is writable; no error callback.
    let rc = unsafe { libc::glob(c.as_ptr(), libc::GLOB_ERR | libc::GLOB_MARK, None, &mut g.0) };
    let mut out = vec![];
    match rc {
        0 => {
            for i in 0..g.0.gl_pathc {
                // SAFETY: glob() left gl_pathc NUL-terminated strings in gl_pathv, alive until
                // `g` drops.
                let p = unsafe { CStr::from_ptr(*g.0.gl_pathv.add(i)) };
                let b = p.to_bytes();
                if b.is_empty() || b.ends_with(b"/") {
                    continue;
                }
                out.push(PathBuf::from(std::ffi::OsStr::from_bytes(b)));
            }
            Ok(out)
        }
        libc::GLOB_NOMATCH => Ok(out),
        libc::GLOB_ABORTED => Err(io::Error::other(
            "read error (a directory in the pattern is missing or unreadable)",
        )),
        _ => Err(io::Error::other(format!("glob() returned {rc}"))),
    }
}

const INTEGER_KEYS: &[&str] = &[
    "pm.max_children",
    "pm.start_servers",
    "pm.min_spare_servers",
    "pm.max_spare_servers",
    "pm.max_spawn_rate",
    "pm.max_requests",
    "listen.backlog",
    "rlimit_files",
    "emergency_restart_threshold",
    "log_limit",
    "process.max",
    "request_slowlog_trace_depth",
];

const TIME_KEYS: &[&str] = &[
    "pm.process_idle_timeout",
    "request_terminate_timeout",
    "request_slowlog_timeout",
    "emergency_restart_interval",
    "process_control_timeout",
    "systemd_interval",
];

/// Directives FPM 8.2 accepts in `[global]` (`php-fpm -tt` lists them; `include` is handled
/// by the parser).
pub const GLOBAL_KEYS: &[&str] = &[
    "include",
    "pid",
    "error_log",
    "syslog.ident",
    "syslog.facility",
    "log_buffering",
    "log_level",
    "log_limit",
    "emergency_restart_interval",
    "emergency_restart_threshold",
    "process_control_timeout",
    "process.max",
    "process.priority",
    "daemonize",
    "rlimit_files",
    "rlimit_core",
    "events.mechanism",
    "systemd_interval",
];

/// Directives FPM 8.2 accepts in a pool section (besides `php_value[...]`,
/// `php_admin_value[...]`, `php_flag[...]`, `php_admin_flag[...]`, `env[...]`).
pub const POOL_KEYS: &[&str] = &[
    "prefix",
    "user",
    "group",
    "listen",
    "listen.backlog",
    "listen.acl_users",
    "listen.acl_groups",
    "listen.owner",
    "listen.group",
    "listen.mode",
    "listen.allowed_clients",
    "listen.setfib",
    "process.priority",
    "process.dumpable",
    "pm",
    "pm.max_children",
    "pm.start_servers",
    "pm.min_spare_servers",
    "pm.max_spare_servers",
    "pm.max_spawn_rate",
    "pm.process_idle_timeout",
    "pm.max_requests",
    "pm.status_path",
    "pm.status_listen",
    "ping.path",
    "ping.response",
    "access.log",
    "access.format",
    "access.suppress_path",
    "slowlog",
    "request_slowlog_timeout",
    "request_slowlog_trace_depth",
    "request_terminate_timeout",
    "request_terminate_timeout_track_finished",
    "rlimit_files",
    "rlimit_core",
    "chroot",
    "chdir",
    "catch_workers_output",
    "decorate_workers_output",
    "clear_env",
    "security.limit_extensions",
    "apparmor_hat",
    "include",
];

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != b[j]))
                .min(row[j] + 1)
                .min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// FPM refuses entries it does not know ("unknown entry"); so does preflight, naming the
/// nearest known one. The list is FPM 8.2's.
fn known_key(key: &str, in_pool: bool) -> Result<(), String> {
    let keys = if in_pool { POOL_KEYS } else { GLOBAL_KEYS };
    if keys.contains(&key) {
        return Ok(());
    }
    if in_pool
        && [
            "php_value[",
            "php_admin_value[",
            "php_flag[",
            "php_admin_flag[",
            "env[",
        ]
        .iter()
        .any(|p| key.starts_with(p) && key.ends_with(']') && key.len() > p.len() + 1)
    {
        return Ok(());
    }
    let near = keys
        .iter()
        .chain(if in_pool { GLOBAL_KEYS } else { POOL_KEYS })
        .map(|k| (distance(key, k), *k))
        .min()
        .filter(|(d, _)| *d <= 2);
    let place = if in_pool {
        "a pool section"
    } else {
        "[global]"
    };
    Err(match near {
        Some((_, k)) if keys.contains(&k) => format!(
            "unknown entry '{key}' in {place} (FPM 8.2 refuses to start; did you mean '{k}'?)"
        ),
        Some((_, k)) => format!(
            "unknown entry '{key}' in {place} (FPM 8.2 refuses to start; '{k}' belongs in {})",
            if in_pool {
                "[global]"
            } else {
                "a pool section"
            }
        ),
        None => format!("unknown entry '{key}' in {place} (FPM 8.2 refuses to start)"),
    })
}

/// FPM's value checks for the keys preflight reads (FPM refuses to load on these).
fn validate_value(key: &str, value: &str) -> Result<(), String> {
    if INTEGER_KEYS.contains(&key) {
        parse_int(value).map_err(|e| format!("unable to parse value for entry '{key}': {e}"))?;
    } else if TIME_KEYS.contains(&key) {
        parse_time_s(value).map_err(|e| format!("unable to parse value for entry '{key}': {e}"))?;
    } else if key == "pm" && !matches!(value, "static" | "dynamic" | "ondemand") {
        return Err(format!(
            "unable to parse value for entry 'pm': invalid process manager (static, dynamic or ondemand), got `{value}`"
        ));
    }
    Ok(())
}

/// FPM's integer syntax: optional leading `-`, then digits.
pub fn parse_int(v: &str) -> Result<i64, &'static str> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("is not a valid number (greater or equal than zero)");
    }
    v.parse().map_err(|_| "is out of range")
}

/// FPM's time syntax: a number with an optional `s`, `m`, `h` or `d` suffix.
pub fn parse_time_s(v: &str) -> Result<i64, &'static str> {
    let (num, mult) = match v.as_bytes().last() {
        Some(b's') => (&v[..v.len() - 1], 1),
        Some(b'm') => (&v[..v.len() - 1], 60),
        Some(b'h') => (&v[..v.len() - 1], 3600),
        Some(b'd') => (&v[..v.len() - 1], 86_400),
        Some(c) if c.is_ascii_digit() => (v, 1),
        Some(_) => return Err("unknown suffix used in time value"),
        None => return Err("invalid time value"),
    };
    parse_int(num).map(|n| n * mult)
}

/// Process manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pm {
    /// max_children workers from the start.
    Static,
    /// Grows with the idle deficit, about one worker per second at min_spare_servers = 1.
    Dynamic,
    /// Forks on arrival, kills workers idle for process_idle_timeout.
    Ondemand,
}

/// Where a pool listens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Listen {
    /// A unix socket path (resolved against the prefix when relative).
    Unix(String),
    /// `host:port` or a bare port.
    Tcp(String),
}

/// The settings of one pool that the rules use, with FPM's defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pool {
    /// Name.
    pub name: String,
    /// `file:line` of the section header.
    pub at: String,
    /// `pm` (None: missing, FPM refuses to start).
    pub pm: Option<Pm>,
    /// pm.max_children (0 when missing).
    pub max_children: i64,
    /// pm.start_servers as written (None: FPM computes min + (max − min) / 2).
    pub start_servers: Option<i64>,
    /// pm.min_spare_servers.
    pub min_spare: i64,
    /// pm.max_spare_servers.
    pub max_spare: i64,
    /// pm.max_spawn_rate (default 32).
    pub max_spawn_rate: i64,
    /// pm.process_idle_timeout, s (default 10).
    pub idle_timeout_s: i64,
    /// pm.max_requests (0: never recycle).
    pub max_requests: i64,
    /// listen.
    pub listen: Option<Listen>,
    /// `file:line` of each pm.* / listen directive that was written.
    pub sources: BTreeMap<String, String>,
}

impl Pool {
    /// The typed view of a pool section; relative unix sockets resolve against the pool's
    /// `prefix` or `prefix` (FPM's order).
    pub fn from_config(p: &PoolConfig, prefix: &str) -> Pool {
        let get = |k: &str| p.directives.get(k);
        let int = |k: &str| get(k).and_then(|d| parse_int(&d.value).ok());
        let pm = get("pm").and_then(|d| match d.value.as_str() {
            "static" => Some(Pm::Static),
            "dynamic" => Some(Pm::Dynamic),
            "ondemand" => Some(Pm::Ondemand),
            _ => None,
        });
        let pool_prefix = get("prefix").map(|d| d.value.clone());
        let listen = get("listen").map(|d| {
            let a = d.value.as_str();
            if a.contains(':') || (!a.is_empty() && a.bytes().all(|b| b.is_ascii_digit())) {
                Listen::Tcp(a.to_string())
            } else if a.starts_with('/') {
                Listen::Unix(a.to_string())
            } else {
                Listen::Unix(format!("{}/{a}", pool_prefix.as_deref().unwrap_or(prefix)))
            }
        });
        let mut sources = BTreeMap::new();
        for (k, d) in &p.directives {
            if k.starts_with("pm") || k.starts_with("listen") {
                sources.insert(k.clone(), d.at());
            }
        }
        Pool {
            name: p.name.clone(),
            at: format!("{}:{}", p.file.display(), p.line),
            pm,
            max_children: int("pm.max_children").unwrap_or(0),
            start_servers: int("pm.start_servers").filter(|&v| v > 0),
            min_spare: int("pm.min_spare_servers").unwrap_or(0),
            max_spare: int("pm.max_spare_servers").unwrap_or(0),
            max_spawn_rate: int("pm.max_spawn_rate").unwrap_or(32),
            idle_timeout_s: get("pm.process_idle_timeout")
                .and_then(|d| parse_time_s(&d.value).ok())
                .unwrap_or(10),
            max_requests: int("pm.max_requests").unwrap_or(0),
            listen,
            sources,
        }
    }

    /// `file:line` of a directive, or of the section when it was not written.
    pub fn source(&self, key: &str) -> &str {
        self.sources
            .get(key)
            .map(String::as_str)
            .unwrap_or(&self.at)
    }
}

/// A worker process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Worker {
    /// Pid.
    pub pid: u32,
    /// Pool (from its title `php-fpm: pool NAME`).
    pub pool: String,
    /// VmRSS, KiB.
    pub rss_kib: u64,
    /// VmHWM (peak resident set since it started), KiB.
    pub hwm_kib: u64,
    /// Private_Clean + Private_Dirty from smaps_rollup, KiB (what exiting would free).
    pub private_kib: Option<u64>,
}

/// A running FPM master.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Master {
    /// Pid.
    pub pid: u32,
    /// The configuration file named in its title (`php-fpm: master process (FILE)`).
    pub config: Option<PathBuf>,
    /// Its workers, largest RSS first.
    pub workers: Vec<Worker>,
    /// CPUs it may run on (Cpus_allowed_list).
    pub cpus_allowed: usize,
}

/// The configuration file from a master's title.
pub fn config_from_title(title: &[u8]) -> Option<PathBuf> {
    let t = title.strip_prefix(b"php-fpm: master process (")?;
    let end = t.iter().rposition(|&c| c == b')')?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&t[..end])))
}

/// The pool name from a worker's title.
pub fn pool_from_title(title: &[u8]) -> Option<String> {
    let t = title.strip_prefix(b"php-fpm: pool ")?;
    Some(crate::escape::bytes(t.trim_ascii_end()))
}

fn is_fpm_comm(comm: &[u8]) -> bool {
    comm.starts_with(b"php-fpm")
}

/// Masters found by process name: php-fpm processes whose parent is not php-fpm.
pub fn find_masters(scan: &[ProcEntry]) -> Vec<u32> {
    scan.iter()
        .filter(|e| is_fpm_comm(&e.stat.comm))
        .filter(|e| {
            !scan
                .iter()
                .any(|p| p.pid == e.stat.ppid && is_fpm_comm(&p.stat.comm))
        })
        .map(|e| e.pid)
        .collect()
}

/// The master of `pid` when `pid` is an FPM master or worker.
pub fn master_of(scan: &[ProcEntry], pid: u32) -> Option<u32> {
    let e = scan.iter().find(|e| e.pid == pid)?;
    if !is_fpm_comm(&e.stat.comm) {
        return None;
    }
    match scan.iter().find(|p| p.pid == e.stat.ppid) {
        Some(parent) if is_fpm_comm(&parent.stat.comm) => Some(parent.pid),
        _ => Some(pid),
    }
}

/// Parses smaps_rollup for the private (unshared) resident memory, KiB.
pub fn parse_private_kib(smaps_rollup: &str) -> Option<u64> {
    let mut total = None;
    for line in smaps_rollup.lines() {
        if let Some(v) = line
            .strip_prefix("Private_Clean:")
            .or_else(|| line.strip_prefix("Private_Dirty:"))
        {
            let n: u64 = v.trim().trim_end_matches("kB").trim().parse().ok()?;
            total = Some(total.unwrap_or(0) + n);
        }
    }
    total
}

/// Reads a master and its workers.
pub fn read_master(scan: &[ProcEntry], pid: u32) -> Master {
    let title = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let title = process::split_cmdline(&title)
        .into_iter()
        .next()
        .unwrap_or_default();
    let cpus_allowed = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .map(|t| process::parse_status(&t))
        .and_then(|s| process::parse_cpu_list(&s.cpus_allowed_list))
        .map(|v| v.len())
        .unwrap_or(0);
    let mut workers = vec![];
    for w in scan.iter().filter(|e| e.stat.ppid == pid) {
        let t = std::fs::read(format!("/proc/{}/cmdline", w.pid)).unwrap_or_default();
        let t = process::split_cmdline(&t)
            .into_iter()
            .next()
            .unwrap_or_default();
        let Some(pool) = pool_from_title(&t) else {
            continue;
        };
        let Ok(st) = std::fs::read_to_string(format!("/proc/{}/status", w.pid)) else {
            continue;
        };
        let st = process::parse_status(&st);
        workers.push(Worker {
            pid: w.pid,
            pool,
            rss_kib: st.vm_rss_kib.unwrap_or(0),
            hwm_kib: st.vm_hwm_kib.unwrap_or(0),
            private_kib: std::fs::read_to_string(format!("/proc/{}/smaps_rollup", w.pid))
                .ok()
                .and_then(|t| parse_private_kib(&t)),
        });
    }
    workers.sort_by(|a, b| b.rss_kib.cmp(&a.rss_kib).then(a.pid.cmp(&b.pid)));
    Master {
        pid,
        config: config_from_title(&title),
        workers,
        cpus_allowed,
    }
}

/// The two spellings of FPM's "out of workers" warning, as fixed strings to grep for.
pub const ALERT_DYNAMIC: &str = "server reached pm.max_children setting";
/// Ondemand's spelling, without the `pm.` prefix.
pub const ALERT_ONDEMAND: &str = "server reached max_children setting";

/// Occurrences of both spellings in the tail of an FPM error log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AlertCounts {
    /// The log file.
    pub file: String,
    /// Bytes scanned (the tail of the file).
    pub scanned_bytes: u64,
    /// `server reached pm.max_children setting (N)` lines.
    pub dynamic: u64,
    /// `server reached max_children setting (N)` lines.
    pub ondemand: u64,
    /// The last matching line (escaped).
    pub last: Option<String>,
}

/// Counts both spellings in `text`.
pub fn count_alerts(text: &[u8]) -> (u64, u64, Option<String>) {
    let (mut d, mut o, mut last) = (0, 0, None);
    for line in text.split(|&b| b == b'\n') {
        let has = |needle: &str| line.windows(needle.len()).any(|w| w == needle.as_bytes());
        if has(ALERT_DYNAMIC) {
            d += 1;
            last = Some(crate::escape::bytes(line));
        } else if has(ALERT_ONDEMAND) {
            o += 1;
            last = Some(crate::escape::bytes(line));
        }
    }
    (d, o, last)
}

/// Scans the last `max` bytes of an error log.
pub fn scan_log(path: &Path, max: u64) -> io::Result<AlertCounts> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(max);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = vec![];
    f.take(max).read_to_end(&mut buf)?;
    let (dynamic, ondemand, last) = count_alerts(&buf);
    Ok(AlertCounts {
        file: crate::escape::bytes(path.as_os_str().as_bytes()),
        scanned_bytes: buf.len() as u64,
        dynamic,
        ondemand,
        last,
    })
}

/// The error log a configuration writes to (None for syslog or stderr).
pub fn error_log(cfg: &FpmConfig, prefix: &str) -> Option<PathBuf> {
    let v = cfg
        .global
        .get("error_log")
        .map(|d| d.value.clone())
        .unwrap_or_else(|| "log/php-fpm.log".into());
    if v == "syslog" || v.starts_with("/dev/") || v.is_empty() {
        return None;
    }
    Some(if v.starts_with('/') {
        PathBuf::from(v)
    } else {
        Path::new(prefix).join(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/fpm")
            .join(rel)
    }

    #[test]
    fn lines() {
        assert_eq!(parse_line("  ; comment").unwrap(), None);
        assert_eq!(
            parse_line("[www] ; the pool").unwrap(),
            Some(IniLine::Section("www".into()))
        );
        assert_eq!(
            parse_line("pm.max_children = 24 ; was 5").unwrap(),
            Some(IniLine::Entry("pm.max_children".into(), "24".into()))
        );
        assert_eq!(
            parse_line(r#"access.format = "%R - %u \"%m\" ; x""#).unwrap(),
            Some(IniLine::Entry(
                "access.format".into(),
                r#"%R - %u "%m" ; x"#.into()
            ))
        );
        assert_eq!(
            parse_line("php_admin_value[memory_limit] = 512M").unwrap(),
            Some(IniLine::Entry(
                "php_admin_value[memory_limit]".into(),
                "512M".into()
            ))
        );
        assert_eq!(
            parse_line("catch_workers_output = yes").unwrap(),
            Some(IniLine::Entry("catch_workers_output".into(), "1".into()))
        );
        assert!(parse_line("[www").is_err());
        assert!(parse_line("pm.max_children").is_err());
        assert!(parse_line("listen = \"/run/x.sock").is_err());
    }

    #[test]
    fn debian_layout_with_includes_and_pool_substitution() {
        let cfg = load(
            &fixture("debian/php-fpm.conf"),
            &fixture("debian").display().to_string(),
        )
        .unwrap();
        assert_eq!(cfg.files.len(), 3, "{:?}", cfg.files);
        // glob(3) sorts: api.conf is read before www.conf.
        assert_eq!(
            cfg.pools
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["api", "www"]
        );
        assert_eq!(cfg.global["error_log"].value, "/var/log/php8.2-fpm.log");
        let www = Pool::from_config(&cfg.pools[1], DEFAULT_PREFIX);
        assert_eq!(www.pm, Some(Pm::Dynamic));
        assert_eq!(www.max_children, 5);
        assert_eq!(www.start_servers, Some(2));
        assert_eq!((www.min_spare, www.max_spare), (1, 3));
        assert_eq!(
            www.listen,
            Some(Listen::Unix("/run/php/php8.2-fpm.sock".into()))
        );
        assert!(
            www.source("pm.max_children")
                .ends_with("pool.d/www.conf:127")
        );
        let api = Pool::from_config(&cfg.pools[0], DEFAULT_PREFIX);
        // `$pool` substituted; a relative socket resolves against the prefix.
        assert_eq!(api.listen, Some(Listen::Unix("/usr/run/api.sock".into())));
        assert_eq!(api.pm, Some(Pm::Ondemand));
        assert_eq!(api.idle_timeout_s, 120);
        assert_eq!(
            cfg.pools[0].directives["slowlog"].value,
            "/var/log/php-fpm/api.slow.log"
        );
    }

    #[test]
    fn malformed_configs_point_at_the_line() {
        let p = fixture("malformed/bare-word.conf");
        let e = load(&p, DEFAULT_PREFIX).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (p.as_path(), 6));
        assert!(e.what.contains("has no `=`"), "{e}");
        let p = fixture("malformed/bad-number.conf");
        let e = load(&p, DEFAULT_PREFIX).unwrap_err();
        assert_eq!(e.line, 5);
        assert!(e.what.contains("'pm.max_children'"), "{e}");
        // The error is in the included file, and says so.
        let p = fixture("malformed/include-broken.conf");
        let e = load(&p, &fixture("malformed").display().to_string()).unwrap_err();
        assert!(e.file.ends_with("broken.d/pool.conf"), "{e}");
        assert_eq!(e.line, 2);
        let p = fixture("malformed/pool-outside.conf");
        let e = load(&p, DEFAULT_PREFIX).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.what.contains("$pool"));
    }

    #[test]
    fn missing_include_directory_is_an_error_and_no_match_a_warning() {
        let p = fixture("malformed/include-missing-dir.conf");
        let e = load(&p, "/nonexistent-prefix").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.what.contains("unable to globalize"), "{e}");
        let p = fixture("malformed/include-nomatch.conf");
        let cfg = load(&p, &fixture("malformed").display().to_string()).unwrap();
        assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
        assert_eq!(cfg.pools.len(), 1);
    }

    #[test]
    fn unknown_entries_and_missing_settings_are_refused_like_fpm() {
        let p = fixture("malformed/typo.conf");
        let e = load(&p, DEFAULT_PREFIX).unwrap_err();
        assert_eq!(e.line, 6);
        assert_eq!(
            e.what,
            "unknown entry 'pm.max_childen' in a pool section (FPM 8.2 refuses to start; did you mean 'pm.max_children'?)"
        );
        let p = fixture("malformed/no-max-children.conf");
        let e = load(&p, DEFAULT_PREFIX).unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(
            e.what,
            "[pool www] pm.max_children must be a positive value (FPM refuses to start)"
        );
        assert!(known_key("php_admin_value[memory_limit]", true).is_ok());
        assert!(known_key("env[PATH]", true).is_ok());
        assert!(known_key("env[]", true).is_err());
        assert!(
            known_key("pid", true)
                .unwrap_err()
                .contains("'pid' belongs in [global]")
        );
        assert_eq!(distance("pm.max_childen", "pm.max_children"), 1);
    }

    #[test]
    fn titles_and_alerts() {
        assert_eq!(
            config_from_title(b"php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)"),
            Some(PathBuf::from("/etc/php/8.2/fpm/php-fpm.conf"))
        );
        assert_eq!(
            pool_from_title(b"php-fpm: pool www    "),
            Some("www".into())
        );
        assert_eq!(pool_from_title(b"php-fpm8.2"), None);
        let log = std::fs::read(fixture("error-log-both-spellings.log")).unwrap();
        let (d, o, last) = count_alerts(&log);
        assert_eq!((d, o), (2, 1));
        assert!(
            last.unwrap()
                .contains("[pool api] server reached max_children setting (4)")
        );
    }

    #[test]
    fn times_and_private_memory() {
        assert_eq!(parse_time_s("10s"), Ok(10));
        assert_eq!(parse_time_s("2m"), Ok(120));
        assert_eq!(parse_time_s("7"), Ok(7));
        assert!(parse_time_s("5x").is_err());
        assert_eq!(
            parse_private_kib("Rss: 100 kB\nPrivate_Clean: 10 kB\nPrivate_Dirty: 90000 kB\n"),
            Some(90_010)
        );
    }
}

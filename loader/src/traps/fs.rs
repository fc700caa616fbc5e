//! Filesystem traps: fs.cwd-slow, fs.hot-path-slow.

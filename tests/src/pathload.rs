//! The exact path-syscall workload (`src/bin/pathload.rs`, a static executable of this crate,
//! so it also runs in the arm64 guests, which have no Python): a process that makes a known
//! number of path syscalls when told to, so a trace of it can be checked count for count.

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::process::CommandExt,
    path::Path,
    process::{Child, ChildStdin, Command, Stdio},
};

/// A running pathload, waiting for `go`.
pub struct PathLoad {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl PathLoad {
    /// Starts `pathload ARGS` and waits for its "ready".
    pub fn start(args: &[&str]) -> PathLoad {
        Self::start_in(Path::new("."), args)
    }

    /// [`PathLoad::start`] with its working directory at `cwd` (relative paths stay there).
    pub fn start_in(cwd: &Path, args: &[&str]) -> PathLoad {
        let mut cmd = Command::new(crate::target_file("pathload"));
        cmd.current_dir(cwd);
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("pathload");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        PathLoad {
            child,
            stdin,
            stdout,
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs the workload and waits until it is done.
    pub fn go(&mut self) {
        writeln!(self.stdin, "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "done");
    }
}

impl Drop for PathLoad {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! Processes: a command started in a process group or a session of its own, this process's
//! transparent huge pages off and its children's as they were, signals to one process or a whole
//! group, whether a group still runs, an exit status as a shell's code, this
//! process's user, its open-file limit, and the signals that ask it to shut down.

use std::future::Future;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use super::procfs;

/// A process id that names one process. Never 0 or negative: `kill(2)` reads those as a whole
/// process group (or every process it may signal), so an id read from a file cannot widen a
/// signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pid(rustix::process::Pid);

impl Pid {
    /// `pid` as a process id, if it can name one.
    pub fn new(pid: u32) -> Option<Pid> {
        i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .map(Pid)
    }

    pub fn get(self) -> u32 {
        self.0.as_raw_nonzero().get() as u32
    }
}

/// The signals the crate sends: a request to end, and the end that cannot be refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `SIGTERM`: the process may clean up first.
    Terminate,
    /// `SIGKILL`.
    Kill,
}

impl Signal {
    fn raw(self) -> rustix::process::Signal {
        match self {
            Signal::Terminate => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
        }
    }
}

/// Sends `signal` to the process `pid`.
pub fn signal(pid: Pid, signal: Signal) -> io::Result<()> {
    rustix::process::kill_process(pid.0, signal.raw()).map_err(io::Error::from)
}

/// Sends `signal` to every process of the process group `group`: a runtime's shell commands, tool
/// processes and MCP servers end with it, not just its first process.
pub fn signal_group(group: Pid, signal: Signal) -> io::Result<()> {
    rustix::process::kill_process_group(group.0, signal.raw()).map_err(io::Error::from)
}

/// Whether any process of `group` is still running. A zombie does not count: an orphan's zombie
/// waits for whatever reaps orphans here, which may be slow, and a zombie cannot act. Read from
/// `/proc` where there is one; elsewhere a zombie counts.
pub fn group_alive(group: Pid) -> bool {
    let Ok(pids) = procfs::pids() else {
        return rustix::process::test_kill_process_group(group.0).is_ok();
    };
    let wanted = group.get().to_string();
    pids.into_iter().any(|pid| {
        // After the command name: the state, the parent, then the process group.
        procfs::stat_fields(pid).is_some_and(|fields| {
            fields.get(2) == Some(&wanted) && fields.first().map(String::as_str) != Some("Z")
        })
    })
}

/// Starts `command`'s process as the leader of a process group of its own (its pid is the
/// group's id), so [`signal_group`] reaches everything it starts and nothing of the daemon.
pub fn in_own_group(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    command.process_group(0)
}

/// Whether transparent huge pages were allowed to this process when it started, before
/// [`without_huge_pages`] turned them off: what each child gets back.
static HUGE_PAGES_ALLOWED_AT_START: AtomicBool = AtomicBool::new(false);

/// Turns transparent huge pages off for this process: the binary has it run before the allocator
/// starts ([`huge_pages_off_before_the_allocator!`](crate::huge_pages_off_before_the_allocator)).
/// Under the kernel's `always` setting every 2 MiB of the allocator's arenas and of each thread's
/// stack touched at all would be resident whole: an idle daemon and each `agentteam run` relay
/// hold a few MiB in use spread over many such regions. The flag is the process's own (the
/// kernel's setting is untouched) and a child would inherit it across fork and exec, so
/// [`child_keeps_huge_pages`] gives each child the setting this process started with.
pub fn without_huge_pages() {
    #[cfg(target_os = "linux")]
    if rustix::thread::transparent_huge_pages_are_disabled() == Ok(false)
        && rustix::thread::disable_transparent_huge_pages(true).is_ok()
    {
        HUGE_PAGES_ALLOWED_AT_START.store(true, Ordering::Relaxed);
    }
}

/// Makes [`without_huge_pages`] a constructor of the binary that expands it, of priority 100:
/// it runs before every constructor of priority 101 and later, among them the allocator's
/// (mimalloc sets up its first arena in one, of priority 101), so under the kernel's `always`
/// setting not even the first arena's pages are faulted in as huge pages. Only a binary expands
/// it: a test process keeps its own setting.
#[macro_export]
macro_rules! huge_pages_off_before_the_allocator {
    () => {
        #[cfg(target_os = "linux")]
        #[used]
        #[unsafe(link_section = ".init_array.00100")]
        static HUGE_PAGES_OFF_BEFORE_THE_ALLOCATOR: extern "C" fn() = {
            extern "C" fn off() {
                $crate::platform::process::without_huge_pages();
            }
            off
        };
    };
}

/// Has `command`'s process start with the huge-page setting this process started with, not the
/// one [`without_huge_pages`] left it.
pub fn child_keeps_huge_pages(command: &mut std::process::Command) -> &mut std::process::Command {
    #[cfg(target_os = "linux")]
    if HUGE_PAGES_ALLOWED_AT_START.load(Ordering::Relaxed) {
        // SAFETY: `prctl` is a system call, async-signal-safe; between fork and exec the child
        // only clears its own flag.
        unsafe {
            command.pre_exec(|| {
                rustix::thread::disable_transparent_huge_pages(false).map_err(io::Error::from)
            });
        }
    }
    command
}

/// Starts `command`'s process in a session of its own, detached from this process's terminal and
/// session: neither a closed terminal (`SIGHUP`) nor the end of the command that started it
/// reaches it.
pub fn in_own_session(command: &mut std::process::Command) -> &mut std::process::Command {
    // SAFETY: `setsid` is async-signal-safe and touches no memory of this process; between fork
    // and exec the child only leaves this command's session and terminal, so neither a closed
    // terminal (SIGHUP) nor this command's end reaches the daemon.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()
                .map(|_| ())
                .map_err(io::Error::from)
        })
    }
}

/// The code a shell reports for `status`: the exit code, or 128 plus the signal that ended it.
pub fn exit_code(status: &ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// This process's effective user id: the owner every private file and directory must have.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Raises this process's soft limit of open files to `wanted`, capped at the hard limit and never
/// lowering it. `Ok` holds the soft limit in force (`None`: unlimited); `Err` the soft limit that
/// stays and why it could not be raised.
pub fn raise_open_files(wanted: u64) -> Result<Option<u64>, (u64, io::Error)> {
    let limit = getrlimit(Resource::Nofile);
    let wanted = match limit.maximum {
        Some(hard) => wanted.min(hard),
        None => wanted,
    };
    match limit.current {
        Some(soft) if soft < wanted => {
            let raised = Rlimit {
                current: Some(wanted),
                maximum: limit.maximum,
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => Ok(Some(wanted)),
                Err(error) => Err((soft, error.into())),
            }
        }
        current => Ok(current),
    }
}

/// Installs the SIGINT and SIGTERM handlers, and returns a future that completes on either.
///
/// The handlers are in place when this returns, not when the future is first polled: a signal
/// that arrives in between is a clean shutdown, not the default kill.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).expect("the SIGTERM handler installs");
    let mut interrupt = signal(SignalKind::interrupt()).expect("the SIGINT handler installs");
    async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    }
}

//! Who may act as the daemon's person, or as the operator of its embedded server: not a process of
//! a runtime this daemon launched.
//!
//! A runtime's model has a shell running as the same user: it can read the admin token and the
//! embedded server's operator token from the state directory, and run `agentteam admin decide` to
//! approve its own request. So the routes that change what the person set (the admin API's
//! agents, turns and extension reloads) and every operator route of the embedded server
//! ask, of the process at the other end of the request's TCP connection, whether it descends
//! from a runtime: the kernel says which socket that end is (`/proc/net/tcp`), which processes
//! hold it (`/proc/<pid>/fd`) and their parents and process groups (`/proc/<pid>/stat`). A
//! process counts as a runtime's when it, or one of its ancestors, is a live run's first process
//! or in that run's process group. Nothing the caller says (an environment variable, a header)
//! enters the decision. A launch is not one of them: the spec lets a runtime start `agentteam
//! run` as another agent, which gets credentials of its own and no more of the person's.
//!
//! This is not a boundary between users: a process that left both the runtime's process group and
//! its ancestry (a double fork into a session of its own), or a process the user runs outside the
//! runtime that acts on its behalf (a user service, a terminal, a proxy), is not a runtime's
//! process here. The README says so.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, OnceLock, Weak};

use super::runtime::{Dispatcher, RunInfo};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::platform::procfs;
use crate::serve::Peer;

/// How many parents up a process's ancestry is followed: far deeper than any real process tree,
/// and a bound on a table read while processes come and go.
const MAX_DEPTH: usize = 256;

/// The embedded server's check of who may act as its operator: the daemon's live runs, once the
/// dispatcher exists (the server starts before it; no run lives before it).
#[derive(Default)]
pub struct Callers {
    dispatcher: OnceLock<Weak<Dispatcher>>,
}

impl Callers {
    pub fn new() -> Arc<Callers> {
        Arc::new(Callers::default())
    }

    /// From now on, the runs of `dispatcher` are the ones a caller must not descend from.
    pub fn bind(&self, dispatcher: &Arc<Dispatcher>) {
        let _ = self.dispatcher.set(Arc::downgrade(dispatcher));
    }
}

impl crate::server::CallerGate for Callers {
    fn refuse(&self, peer: Option<Peer>) -> Option<ActionError> {
        let dispatcher = self.dispatcher.get().and_then(Weak::upgrade)?;
        check(&dispatcher.runs(), peer).err()
    }
}

/// `Ok` when the caller at `peer` is no process of `runs`; otherwise the refusal, which names
/// the run. With no run live there is nothing to ask; while any is, a caller that cannot be told
/// apart from one (no TCP connection, no `/proc`) is refused.
pub fn check(runs: &[RunInfo], peer: Option<Peer>) -> Result<(), ActionError> {
    let runs: Vec<&RunInfo> = runs.iter().filter(|run| run.pid > 1).collect();
    if runs.is_empty() {
        return Ok(());
    }
    let Some(peer) = peer else {
        return Err(cannot_tell("the request came on no TCP connection"));
    };
    match runtime_of(&runs, peer) {
        Ok(None) => Ok(()),
        Ok(Some(run)) => Err(ActionError::new(
            ErrorCode::Forbidden,
            format!(
                "a runtime may not act as its person or as the operator: this request comes \
                 from a process of run `{}` (agent `{}`), which this daemon launched",
                run.run_id, run.agent_id
            ),
        )
        .with_hint("run it from your own terminal, not from inside `agentteam run`")),
        Err(error) => Err(cannot_tell(&error.to_string())),
    }
}

fn cannot_tell(why: &str) -> ActionError {
    ActionError::new(
        ErrorCode::Forbidden,
        format!(
            "cannot tell whether this request comes from a runtime this daemon launched ({why}); \
             while runtimes run, such a request is refused"
        ),
    )
}

/// The run one of whose processes holds the client's end of the connection `peer`, if one does.
fn runtime_of<'a>(runs: &[&'a RunInfo], peer: Peer) -> io::Result<Option<&'a RunInfo>> {
    let Some(socket) = procfs::tcp_socket_inode(peer.remote, peer.local)? else {
        // No socket of this network namespace has those ends: the client is gone, or the
        // connection came from another namespace, where no runtime of this daemon runs.
        return Ok(None);
    };
    let table: HashMap<u32, (u32, u32)> = procfs::pids()?
        .into_iter()
        .filter_map(|pid| {
            // After the command name: the state, the parent, then the process group.
            let fields = procfs::stat_fields(pid)?;
            Some((
                pid,
                (fields.get(1)?.parse().ok()?, fields.get(2)?.parse().ok()?),
            ))
        })
        .collect();
    Ok(table.keys().find_map(|&pid| {
        launched_by(runs, &table, pid).filter(|_| procfs::holds_socket(pid, socket))
    }))
}

/// The run `pid` belongs to: the run's first process, a process of its group, or a descendant of
/// either, by `table` (each process's parent and process group).
fn launched_by<'a>(
    runs: &[&'a RunInfo],
    table: &HashMap<u32, (u32, u32)>,
    pid: u32,
) -> Option<&'a RunInfo> {
    let mut current = pid;
    for _ in 0..MAX_DEPTH {
        let &(parent, group) = table.get(&current)?;
        if let Some(run) = runs
            .iter()
            .find(|run| run.pid == current || run.pid == group)
        {
            return Some(run);
        }
        if parent <= 1 {
            return None;
        }
        current = parent;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pid: u32) -> RunInfo {
        RunInfo {
            run_id: format!("run_{pid}"),
            agent_id: "agt_a".into(),
            session: "default".into(),
            process_generation: 1,
            pid,
            started_at_ms: 0,
            turn: None,
            runtime: crate::daemon::runtime::driver::Family::Generic,
            program: "sh".into(),
        }
    }

    /// A run's first process, a process of its group, and their descendants belong to it; a
    /// process whose ancestry and group reach no run belongs to none, and a cycle in a table read
    /// while processes came and went ends at the depth bound.
    #[test]
    fn a_process_belongs_to_the_run_it_descends_from() {
        let (a, b) = (run(100), run(200));
        let runs = [&a, &b];
        let table: HashMap<u32, (u32, u32)> = [
            (1, (0, 1)),
            (50, (1, 50)),     // the daemon
            (100, (50, 100)),  // run a's first process
            (101, (100, 100)), // its shell
            (102, (101, 102)), // a command that took a group of its own
            (103, (1, 100)),   // an orphan still in run a's group
            (200, (50, 200)),  // run b
            (300, (1, 300)),   // the person's terminal
            (301, (300, 300)),
            (400, (401, 400)), // a cycle
            (401, (400, 400)),
        ]
        .into_iter()
        .collect();
        let of = |pid| launched_by(&runs, &table, pid).map(|run| run.run_id.clone());
        assert_eq!(of(100).as_deref(), Some("run_100"));
        assert_eq!(of(102).as_deref(), Some("run_100"));
        assert_eq!(of(103).as_deref(), Some("run_100"));
        assert_eq!(of(200).as_deref(), Some("run_200"));
        assert_eq!(of(50), None);
        assert_eq!(of(301), None);
        assert_eq!(of(400), None);
        assert_eq!(of(999), None);
    }

    /// With no run there is nothing to ask; with one, a caller on no connection is refused.
    #[test]
    fn a_caller_that_cannot_be_told_apart_is_refused_only_while_runs_live() {
        assert!(check(&[], None).is_ok());
        let refused = check(&[run(100)], None).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Forbidden);
        assert!(
            refused.message.contains("cannot tell"),
            "{}",
            refused.message
        );
    }

    /// This test process holds the client's end of a loopback connection: as a run's first
    /// process it is refused, naming the run; as no run's it is not.
    #[test]
    fn the_process_holding_the_client_end_is_the_one_asked_about() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let peer = Peer {
            local: server.local_addr().unwrap(),
            remote: server.peer_addr().unwrap(),
        };
        let refused = check(&[run(std::process::id())], Some(peer)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Forbidden);
        assert!(
            refused
                .message
                .contains(&format!("run `run_{}`", std::process::id())),
            "{}",
            refused.message
        );
        let unrelated = std::process::id().wrapping_add(1_000_000);
        assert!(check(&[run(unrelated)], Some(peer)).is_ok());
    }
}

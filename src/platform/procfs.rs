//! What Linux's `/proc` says of processes: which exist, and of one its state, parent and process
//! group (`stat`), its environment and its command name, for the checks the daemon and the CLI
//! make of a process they did not start.

use std::io;

/// Every process id `/proc` lists; an error where there is no `/proc` to read.
pub fn pids() -> io::Result<Vec<u32>> {
    Ok(std::fs::read_dir("/proc")?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            name.parse().ok()
        })
        .collect())
}

/// The fields of `/proc/<pid>/stat` after the command name: the state first (`Z` for a zombie),
/// the parent's pid second, the process group third. The command name may hold anything, a `)`
/// or spaces included, so the fields are read after its last `)`.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The environment process `pid` started with (`NAME=value` entries, each ended by a NUL), as
/// the kernel keeps it: readable only for this user's own processes.
pub fn environ(pid: u32) -> io::Result<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ"))
}

/// The command name of process `pid` (its executable's name, at most 15 bytes, newline-ended).
pub fn comm(pid: u32) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
}

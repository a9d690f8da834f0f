//! A runtime's home made private for one launch, for a runtime that reads what a driver must add
//! only from its home (Kimi Code's `KIMI_CODE_HOME`, Gemini CLI's `~/.gemini`): a directory in
//! the launch's guidance directory that links every entry of the user's own (a link, never a
//! copy), beside the few files the driver writes there itself.
//!
//! The runtime's own writes go through the links into the user's directory, as they would without
//! `agentteam`. Two kinds of write cannot: a file the runtime creates at the top of its home, and a
//! file it rewrites by renaming a new one over the name (Gemini's `projects.json`), which replaces
//! the link. At the end of the launch [`PrivateHome::give_back`] puts both where the runtime would
//! have written them: a new entry into the user's directory (unless one of that name appeared
//! there meanwhile), a rewritten file over the user's file it linked. Nothing of the driver's own
//! goes back, and nothing the user has is removed.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// Files given back are at most this large; a larger one stays behind (logged).
const MAX_GIVEN_FILE: u64 = 16 * 1024 * 1024;
/// At most this many entries are given back from one home (a runtime's top level is small).
const MAX_GIVEN_ENTRIES: usize = 256;
/// A directory the runtime made is given back at most this deep.
const MAX_GIVEN_DEPTH: usize = 8;

/// One launch's private copy of a runtime's home directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateHome {
    /// The directory the runtime is pointed at (in the launch's guidance directory).
    pub ours: PathBuf,
    /// The user's own directory it links.
    pub theirs: PathBuf,
    /// The entries the driver writes itself: never linked, never given back.
    written: Vec<OsString>,
    /// The user's entries that were linked at the launch.
    linked: Vec<OsString>,
}

impl PrivateHome {
    /// Makes `ours` (0700) and links every entry of `theirs` into it except `written`, the names
    /// the driver writes there itself. A missing `theirs` links nothing.
    pub fn link(theirs: &Path, ours: &Path, written: &[&str]) -> io::Result<PrivateHome> {
        crate::platform::fs::create_private_dir(ours)?;
        let written: Vec<OsString> = written.iter().map(OsString::from).collect();
        let mut linked = Vec::new();
        match std::fs::read_dir(theirs) {
            Ok(entries) => {
                for entry in entries {
                    let name = entry?.file_name();
                    if !written.contains(&name) {
                        crate::platform::fs::symlink(&theirs.join(&name), &ours.join(&name))?;
                        linked.push(name);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(PrivateHome {
            ours: ours.to_path_buf(),
            theirs: theirs.to_path_buf(),
            written,
            linked,
        })
    }

    /// Puts what the runtime itself left at the top of `ours` where it would have written it
    /// without `agentteam` (see the module). Returns one line per entry given back, and per entry
    /// that could not be, for the launcher and the log.
    pub fn give_back(&self) -> Vec<String> {
        let mut said = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.ours) else {
            return said;
        };
        let mut given = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if self.written.contains(&name) || metadata.file_type().is_symlink() {
                continue;
            }
            if given == MAX_GIVEN_ENTRIES {
                said.push(format!(
                    "more than {MAX_GIVEN_ENTRIES} entries of the runtime's own in {}: the rest is not given back",
                    self.ours.display()
                ));
                break;
            }
            given += 1;
            let target = self.theirs.join(&name);
            let shown = target.display();
            // A name that was linked is a file the runtime rewrote over its link; any other is
            // new, and goes only where that name is still free.
            let rewritten = self.linked.contains(&name);
            let result = if !rewritten && std::fs::symlink_metadata(&target).is_ok() {
                Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "one of that name appeared there meanwhile",
                ))
            } else if metadata.is_file() {
                give_file(&entry.path(), &target, &metadata)
            } else if metadata.is_dir() && !rewritten {
                give_dir(&entry.path(), &target, 0)
            } else {
                continue;
            };
            match result {
                Ok(()) => said.push(format!(
                    "the runtime's own {shown} written where it keeps it"
                )),
                Err(e) => said.push(format!(
                    "the runtime's own {shown} is not written back: {e}"
                )),
            }
        }
        said
    }
}

/// A file the runtime wrote: into the user's directory, over a file of theirs it replaced (a
/// regular file only: never over a link or a directory of theirs).
fn give_file(from: &Path, to: &Path, metadata: &std::fs::Metadata) -> io::Result<()> {
    if metadata.len() > MAX_GIVEN_FILE {
        return Err(io::Error::other(format!(
            "it is over {MAX_GIVEN_FILE} bytes"
        )));
    }
    match std::fs::symlink_metadata(to) {
        Ok(theirs) if !theirs.is_file() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "one of that name that is not a file is there",
            ));
        }
        Ok(_) | Err(_) => {}
    }
    let bytes = std::fs::read(from)?;
    crate::private_file::replace_bytes(to, &bytes)
}

/// A directory the runtime made: copied whole into the user's directory (bounded in depth; links
/// inside it are left out).
fn give_dir(from: &Path, to: &Path, depth: usize) -> io::Result<()> {
    if depth == MAX_GIVEN_DEPTH {
        return Err(io::Error::other(format!(
            "it is nested deeper than {MAX_GIVEN_DEPTH}"
        )));
    }
    crate::platform::fs::create_private_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let metadata = std::fs::symlink_metadata(entry.path())?;
        let target = to.join(entry.file_name());
        if metadata.is_dir() {
            give_dir(&entry.path(), &target, depth + 1)?;
        } else if metadata.is_file() {
            give_file(&entry.path(), &target, &metadata)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_own_writes_go_back_and_the_drivers_stay() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        let ours = dir.path().join("ours");
        std::fs::create_dir_all(theirs.join("sessions")).unwrap();
        std::fs::write(theirs.join("projects.json"), "old").unwrap();
        std::fs::write(theirs.join("settings.json"), "mine").unwrap();
        let home = PrivateHome::link(&theirs, &ours, &["settings.json"]).unwrap();
        assert!(ours.join("projects.json").is_symlink());
        assert!(ours.join("sessions").is_symlink());
        assert!(
            !ours.join("settings.json").exists(),
            "the driver writes its own"
        );
        std::fs::write(ours.join("settings.json"), "the driver's").unwrap();

        // The runtime: a write through a link, a rename over one, a new file, a new directory.
        std::fs::write(ours.join("sessions").join("s1"), "chat").unwrap();
        std::fs::write(dir.path().join("new-projects"), "new").unwrap();
        std::fs::rename(dir.path().join("new-projects"), ours.join("projects.json")).unwrap();
        std::fs::write(ours.join("installation_id"), "id").unwrap();
        std::fs::create_dir_all(ours.join("logs").join("deep")).unwrap();
        std::fs::write(ours.join("logs").join("deep").join("l"), "log").unwrap();
        let said = home.give_back();
        assert_eq!(said.len(), 3, "{said:?}");
        assert_eq!(
            std::fs::read_to_string(theirs.join("projects.json")).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::read_to_string(theirs.join("installation_id")).unwrap(),
            "id"
        );
        assert_eq!(
            std::fs::read_to_string(theirs.join("logs/deep/l")).unwrap(),
            "log"
        );
        assert_eq!(
            std::fs::read_to_string(theirs.join("settings.json")).unwrap(),
            "mine",
            "the driver's own file is not given back"
        );
        assert_eq!(
            std::fs::read_to_string(theirs.join("sessions/s1")).unwrap(),
            "chat"
        );
    }

    #[test]
    fn nothing_of_theirs_is_overwritten_but_a_file_the_runtime_rewrote() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        let ours = dir.path().join("ours");
        std::fs::create_dir_all(&theirs).unwrap();
        let home = PrivateHome::link(&theirs, &ours, &[]).unwrap();
        // A file and a directory of those names appeared in theirs meanwhile: the runtime's new
        // ones stay out.
        std::fs::create_dir_all(theirs.join("state")).unwrap();
        std::fs::write(ours.join("state"), "runtime").unwrap();
        std::fs::write(theirs.join("late"), "theirs").unwrap();
        std::fs::write(ours.join("late"), "runtime").unwrap();
        // Too large.
        let big = std::fs::File::create(ours.join("big")).unwrap();
        big.set_len(MAX_GIVEN_FILE + 1).unwrap();
        let said = home.give_back();
        assert!(theirs.join("state").is_dir());
        assert_eq!(
            std::fs::read_to_string(theirs.join("late")).unwrap(),
            "theirs"
        );
        assert!(!theirs.join("big").exists());
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said.iter().all(|line| line.contains("is not written back")));
        // A missing home of theirs links nothing.
        let none = PrivateHome::link(&dir.path().join("absent"), &dir.path().join("o2"), &[]);
        assert!(none.is_ok());
    }
}

//! `agentteam daemon install | uninstall`: the daemon as a login service of this user, a systemd
//! user unit (Linux) or a launchd agent (macOS, whose file is rendered here for `--print` only:
//! the crate builds for Linux only, so nothing here installs one), running the daemon with the
//! state directory and flags given; and the unit's side of `agentteam daemon stop`.
//!
//! The file names the daemon's executable by its absolute path and carries only flags, which by
//! design hold no secret (credentials come from files the flags name); it sets no environment.
//! It restarts the daemon when it fails, a bounded number of times, and its output goes where the
//! platform keeps a service's logs (the user journal; `~/Library/Logs/agentteam`, which the
//! printed agent says to create). A file at the unit's path that `install` did not write is left
//! alone: installing refuses, naming it.
//!
//! `systemctl` answers exit status 1 both when no user manager is reachable and when the manager
//! ran the job and it failed; only its words tell them apart (`Failed to connect to …`, see
//! [`systemctl`]). `install` finishes the first in the person's login session (exit 0, saying
//! what to run there) and reports the second (exit 1).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::output::{Exit, print, printable, usage_error};

/// The first line of every file `install` writes: the mark that lets it replace or remove one.
const MARK: &str = "Written by `agentteam daemon install`";

/// A login service format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A systemd user unit (Linux)
    Systemd,
    /// A launchd agent's property list (macOS)
    Launchd,
}

/// What a service runs: the executable, its `daemon` flags, and the state directory they name.
pub struct Service {
    pub executable: PathBuf,
    /// The flags after `daemon` (`--state-dir …` among them).
    pub flags: Vec<String>,
    pub state_dir: PathBuf,
}

impl Service {
    /// The command line: the executable, `daemon`, the flags.
    fn argv(&self) -> impl Iterator<Item = String> + '_ {
        std::iter::once(self.executable.display().to_string())
            .chain(std::iter::once("daemon".to_string()))
            .chain(self.flags.iter().cloned())
    }

    /// A word of the command line that cannot be written into a unit or a property list as it
    /// is: a control character (a line break would start a setting of its own).
    fn unwritable(&self) -> Option<String> {
        self.argv()
            .find(|word| word.chars().any(char::is_control))
            .map(|word| word.escape_default().to_string())
    }

    /// `agentteam` for the default state directory, `agentteam-<8 hex of its path>` for another,
    /// so each state directory has a service of its own.
    fn name(&self) -> String {
        if self.state_dir == crate::daemon::default_state_dir() {
            "agentteam".to_string()
        } else {
            let digest = Sha256::digest(self.state_dir.as_os_str().as_encoded_bytes());
            format!("agentteam-{}", &hex::encode(digest)[..8])
        }
    }

    /// The systemd user unit.
    pub fn systemd_unit(&self) -> String {
        let exec: Vec<String> = self.argv().map(|word| systemd_word(&word)).collect();
        format!(
            "# {MARK}: `agentteam daemon uninstall` removes it.\n\
             [Unit]\n\
             Description=AgentTeam daemon for {state}\n\
             # At most 5 restarts in 5 minutes; then it stays failed until started again.\n\
             StartLimitIntervalSec=300\n\
             StartLimitBurst=5\n\
             \n\
             [Service]\n\
             Type=simple\n\
             ExecStart={exec}\n\
             Restart=on-failure\n\
             RestartSec=2\n\
             # SIGTERM to the daemon alone: it revokes every runtime's credential, then stops\n\
             # their process groups itself; what is left when it exits is killed.\n\
             KillMode=mixed\n\
             TimeoutStopSec=60\n\
             UMask=0077\n\
             NoNewPrivileges=true\n\
             StandardOutput=journal\n\
             StandardError=journal\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
            state = systemd_text(&self.state_dir.display().to_string()),
            exec = exec.join(" "),
        )
    }

    /// The launchd agent's property list.
    pub fn launchd_plist(&self, home: &Path) -> String {
        let logs = home.join("Library/Logs/agentteam");
        let log = logs.join(format!("{}.log", self.name()));
        let arguments: String = self
            .argv()
            .map(|word| format!("    <string>{}</string>\n", xml_text(&word)))
            .collect();
        let label = format!("dev.agentteam.{}", self.name());
        // What the comment says is all there is to do: this crate prints the agent and installs
        // none, and launchd creates no directory for `StandardOutPath`. (An XML comment holds no
        // `--`, and no path: `$HOME` is `~` here.)
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!-- Printed by `agentteam daemon install`, which installs only systemd units. To run it at login on macOS: \
             mkdir -p ~/Library/Logs/agentteam (its log directory, which launchd does not create); \
             save this file as ~/Library/LaunchAgents/{label}.plist; \
             launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/{label}.plist \
             (launchctl bootout gui/$(id -u)/{label} stops it). -->\n\
             <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
             <plist version=\"1.0\">\n\
             <dict>\n\
             \x20 <key>Label</key>\n\
             \x20 <string>{label}</string>\n\
             \x20 <key>ProgramArguments</key>\n\
             \x20 <array>\n\
             {arguments}\
             \x20 </array>\n\
             \x20 <key>RunAtLoad</key>\n\
             \x20 <true/>\n\
             \x20 <key>KeepAlive</key>\n\
             \x20 <dict>\n\
             \x20   <key>SuccessfulExit</key>\n\
             \x20   <false/>\n\
             \x20 </dict>\n\
             \x20 <key>ThrottleInterval</key>\n\
             \x20 <integer>10</integer>\n\
             \x20 <key>ProcessType</key>\n\
             \x20 <string>Background</string>\n\
             \x20 <key>Umask</key>\n\
             \x20 <integer>63</integer>\n\
             \x20 <key>StandardOutPath</key>\n\
             \x20 <string>{log}</string>\n\
             \x20 <key>StandardErrorPath</key>\n\
             \x20 <string>{log}</string>\n\
             </dict>\n\
             </plist>\n",
            log = xml_text(&log.display().to_string()),
        )
    }

    /// Where `install` puts the file of `format`, under `config` (`$XDG_CONFIG_HOME`) or `home`.
    fn path(&self, format: Format, config: &Path, home: &Path) -> PathBuf {
        match format {
            Format::Systemd => config
                .join("systemd/user")
                .join(format!("{}.service", self.name())),
            Format::Launchd => home
                .join("Library/LaunchAgents")
                .join(format!("dev.agentteam.{}.plist", self.name())),
        }
    }
}

/// `word` as one word of a systemd command line: `%` and `$` doubled (no specifier, no
/// variable), quoted when it holds whitespace, a quote or a backslash, or is a lone `;` (the
/// separator of commands). A control character never reaches it (`Service::unwritable`).
fn systemd_word(word: &str) -> String {
    let word = systemd_text(word).replace('$', "$$");
    if word.is_empty()
        || word == ";"
        || word
            .chars()
            .any(|c| c.is_whitespace() || "\"'\\".contains(c))
    {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word
    }
}

/// Text in a unit: `%` doubled, so systemd expands no specifier in it.
fn systemd_text(text: &str) -> String {
    text.replace('%', "%%")
}

/// Text in XML: its five special characters escaped.
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The format of this platform.
pub fn native() -> Format {
    if cfg!(target_os = "macos") {
        Format::Launchd
    } else {
        Format::Systemd
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn config_home() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".config"))
}

fn render(service: &Service, format: Format) -> String {
    match format {
        Format::Systemd => service.systemd_unit(),
        Format::Launchd => service.launchd_plist(&home()),
    }
}

/// `agentteam daemon install [--print] [--format F] [daemon flags…]`.
pub fn install(service: Service, format: Option<Format>, print_only: bool) -> Exit {
    let format = format.unwrap_or_else(native);
    if let Some(word) = service.unwritable() {
        return usage_error(
            &format!("`{word}` holds a control character, which a service file cannot carry"),
            &[],
        );
    }
    let text = render(&service, format);
    if print_only {
        return print(&text);
    }
    if format != native() {
        return usage_error(
            &format!("a {format:?} service cannot be installed on this system"),
            &["`--print` shows its file".to_string()],
        );
    }
    // A daemon already running for the state directory outside the unit would keep the
    // unit's own from taking the lock: it would fail and restart until systemd gives up.
    match super::local::detached_daemon(&service.state_dir) {
        Ok(Some(pid)) => {
            return usage_error(
                &format!(
                    "a daemon runs for `{}` outside systemd (pid {pid})",
                    service.state_dir.display()
                ),
                &["stop it first with `agentteam daemon stop`".to_string()],
            );
        }
        Ok(None) => {}
        Err(exit) => return exit,
    }
    let path = service.path(format, &config_home(), &home());
    if let Ok(existing) = std::fs::read_to_string(&path)
        && !existing.contains(MARK)
    {
        return usage_error(
            &format!(
                "`{}` exists and was not written by `agentteam daemon install`",
                path.display()
            ),
            &["move it away first, or print ours with `--print`".to_string()],
        );
    }
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return usage_error(&format!("cannot create `{}`: {e}", dir.display()), &[]);
    }
    if let Err(e) = crate::private_file::replace(&path, &text) {
        return usage_error(&format!("cannot write `{}`: {e}", path.display()), &[]);
    }
    eprintln!("agentteam: wrote {}", path.display());
    let unit = format!("{}.service", service.name());
    let mut exit = Exit::Success;
    // A reload the manager could not do shows in the start that follows; no manager: nothing to
    // reload.
    let _ = systemctl(&["daemon-reload"]);
    // `enable` links the unit for login without a manager (systemctl edits the files itself).
    match systemctl(&["enable", &unit]) {
        Systemctl::Done => eprintln!("agentteam: {unit} starts at login"),
        Systemctl::Unreachable(said) => eprintln!(
            "agentteam: could not enable {unit} ({}): run `systemctl --user enable --now {unit}` in your login session",
            first_line(&said)
        ),
        Systemctl::Failed(said) => {
            exit = failed(
                &format!("{unit} is written but not enabled at login"),
                &said,
                &unit,
            );
        }
    }
    match systemctl(&["start", &unit]) {
        Systemctl::Done => eprintln!(
            "agentteam: {unit} runs now (`systemctl --user status {unit}`; its log: `journalctl --user -u {unit}`)"
        ),
        Systemctl::Unreachable(said) => eprintln!(
            "agentteam: systemd's user manager is not reachable here ({}), so {unit} does not run yet: run `systemctl --user start {unit}` in your login session",
            first_line(&said)
        ),
        Systemctl::Failed(said) => {
            exit = failed(
                &format!("{unit} is installed but failed to start"),
                &said,
                &unit,
            );
        }
    }
    exit
}

/// Says that systemd's user manager answered `what` (its words `said`) about `unit`, and returns
/// the exit of an action that ran and failed: the unit is written, and what systemd refused is
/// for the person to see in its status and journal.
fn failed(what: &str, said: &str, unit: &str) -> Exit {
    eprintln!("error: {what}");
    for line in said.lines().filter(|line| !line.trim().is_empty()) {
        eprintln!("  caused by: systemctl: {}", printable(line.trim()));
    }
    eprintln!("hint: `systemctl --user status {unit}` and `journalctl --user -u {unit}` say why");
    Exit::ActionFailed
}

/// The first line of what `systemctl` said, safe to show.
fn first_line(said: &str) -> String {
    printable(said.lines().next().unwrap_or_default().trim())
}

/// The unit side of `agentteam daemon stop` for `state_dir` (absolute): when `install` wrote its
/// unit, `systemctl --user stop` it, so systemd starts no daemon there until the next login or
/// start. The daemon was stopped already, with what that ends said and asked; this covers the
/// rest: a daemon whose exit systemd counts as a failure would be restarted (`Restart=`), and so
/// would one the unit was waiting to restart. No manager reachable: none runs a daemon to stop.
pub fn stop_unit(state_dir: PathBuf) -> Exit {
    if native() != Format::Systemd {
        return Exit::Success;
    }
    let service = Service {
        executable: PathBuf::new(),
        flags: Vec::new(),
        state_dir,
    };
    let path = service.path(Format::Systemd, &config_home(), &home());
    if !std::fs::read_to_string(&path).is_ok_and(|text| text.contains(MARK)) {
        return Exit::Success;
    }
    let unit = format!("{}.service", service.name());
    match systemctl(&["stop", &unit]) {
        Systemctl::Done => {
            eprintln!(
                "agentteam: {unit} stays stopped until the next login (or `systemctl --user start {unit}`)"
            );
            Exit::Success
        }
        Systemctl::Unreachable(_) => Exit::Success,
        Systemctl::Failed(said) => failed(
            &format!("{unit} may start the daemon again: stopping it failed"),
            &said,
            &unit,
        ),
    }
}

/// `agentteam daemon uninstall [--format F]`: stops and disables the service, and removes its
/// file (only one `install` wrote).
pub fn uninstall(service: Service, format: Option<Format>) -> Exit {
    let format = format.unwrap_or_else(native);
    let path = service.path(format, &config_home(), &home());
    match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("agentteam: no service is installed at {}", path.display());
            return Exit::Success;
        }
        Err(e) => return usage_error(&format!("cannot read `{}`: {e}", path.display()), &[]),
        Ok(existing) if !existing.contains(MARK) => {
            return usage_error(
                &format!(
                    "`{}` was not written by `agentteam daemon install`; it is left alone",
                    path.display()
                ),
                &[],
            );
        }
        Ok(_) => {}
    }
    if format == Format::Systemd {
        systemctl(&["disable", "--now", &format!("{}.service", service.name())]);
    }
    if let Err(e) = std::fs::remove_file(&path) {
        return usage_error(&format!("cannot remove `{}`: {e}", path.display()), &[]);
    }
    if format == Format::Systemd {
        systemctl(&["daemon-reload"]);
    }
    eprintln!("agentteam: removed {}", path.display());
    Exit::Success
}

/// How `systemctl --user` answered.
enum Systemctl {
    /// It did what was asked.
    Done,
    /// No user manager answered (or `systemctl` cannot run here): what it said.
    Unreachable(String),
    /// The manager answered and refused, or ran the job and it failed: what it said.
    Failed(String),
}

/// `systemctl --user ARGS`, its output kept from the terminal. It exits 1 both when it reaches
/// no manager and when a job fails; what it says tells them apart: `Failed to connect to bus: …`
/// (systemd 252, Debian 12) or `Failed to connect to user scope bus via local transport: …`
/// (later), both from its bus connection, before anything was asked.
fn systemctl(args: &[&str]) -> Systemctl {
    let mut command = std::process::Command::new("systemctl");
    let output = crate::platform::process::child_keeps_huge_pages(&mut command)
        .arg("--user")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    match output {
        Err(e) => Systemctl::Unreachable(format!("cannot run `systemctl`: {e}")),
        Ok(output) if output.status.success() => Systemctl::Done,
        Ok(output) => {
            let mut said = String::from_utf8_lossy(&output.stderr).trim().to_string();
            if said.is_empty() {
                said = format!(
                    "`systemctl --user {}` failed ({})",
                    args.join(" "),
                    output.status
                );
            }
            if said
                .lines()
                .any(|line| line.starts_with("Failed to connect to"))
            {
                Systemctl::Unreachable(said)
            } else {
                Systemctl::Failed(said)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_word_is_safe_in_a_unit() {
        assert_eq!(systemd_word("/usr/bin/agentteam"), "/usr/bin/agentteam");
        assert_eq!(systemd_word("/a b/agentteam"), "\"/a b/agentteam\"");
        assert_eq!(systemd_word("50%$HOME"), "50%%$$HOME");
        assert_eq!(systemd_word(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(xml_text("<a & 'b'>"), "&lt;a &amp; &apos;b&apos;&gt;");
        assert_eq!(systemd_word(";"), "\";\"");
    }
}

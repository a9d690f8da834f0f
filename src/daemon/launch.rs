//! A runtime launch, as the person asks for it (`agentteam run`, the admin API) and as the
//! deliverer starts one for a delivery: the launch's own checks, its local agent, the driver
//! that wires it, then the dispatcher. One path, so a delivered run is launched exactly as
//! `agentteam run` launches.

use tokio::sync::mpsc;

use super::runtime::driver::{self, Family};
use super::runtime::env::ChildEnv;
use super::runtime::{LaunchError, LaunchOptions, LaunchRequest, Output};
use super::state::DaemonState;
use crate::contract::error::ErrorCode;
use crate::contract::{ActionError, ActionResult};
use crate::wire;

/// Starts a runtime: its output frames, or why it was refused.
pub async fn start(
    state: &DaemonState,
    options: LaunchOptions,
) -> ActionResult<mpsc::Receiver<Output>> {
    let request = resolve(state, options)?;
    if request.options.runtime == Family::Kimi {
        let program = request
            .options
            .argv
            .first()
            .map(String::as_str)
            .unwrap_or("");
        driver::check_kimi(program, &request.env, &request.options.workdir)
            .await
            .map_err(|message| ActionError::new(ErrorCode::ValidationFailed, message))?;
    }
    state
        .dispatcher
        .launch(request)
        .await
        .map_err(|error| refusal(&error))
}

/// The launch's own checks, its agent and its working directory.
fn resolve(state: &DaemonState, options: LaunchOptions) -> ActionResult<LaunchRequest> {
    options
        .check()
        .map_err(|message| ActionError::new(ErrorCode::ValidationFailed, message))?;
    let profile = state.agents.store.find(&options.agent).ok_or_else(|| {
        ActionError::new(
            ErrorCode::NotFound,
            format!(
                "no local agent `{}`",
                options.agent.chars().take(64).collect::<String>()
            ),
        )
        .with_next("add it with `agentteam agent add <handle>`")
    })?;
    if !options.workdir.is_dir() {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("workdir `{}` is not a directory", options.workdir.display()),
        ));
    }
    let mut options = options;
    // Stripped once, here: nothing the daemon starts for this launch (a version probe, the
    // driver's reading of the user's setup, the runtime) sees the launcher's daemon-owned
    // variables, such as a parent runtime's credential paths.
    let env = ChildEnv::inherit(std::mem::take(&mut options.env));
    let mut notices = Vec::new();
    let program = options.argv.first().map(String::as_str).unwrap_or("");
    let (family, how) = options
        .runtime
        .resolve(program, &profile.profile.runtime_family);
    if options.runtime == Family::Auto {
        notices.push(format!("runtime driver: {} ({how})", family.as_str()));
    }
    options.runtime = family;
    if let Some(session) = options.resume.take() {
        match driver::put_in_session(family, &mut options.argv, &session) {
            Some(said) => notices.push(format!("runtime session: {said}")),
            None => notices.push(format!(
                "runtime session: {} is not resumed by its driver; this run is a new session",
                family.as_str()
            )),
        }
    }
    if family == Family::Codex && driver::codex_app_server(&options.argv[1..]) && !options.stdin {
        // Its protocol comes on stdin: an empty one would end it at once.
        options.stdin = true;
        notices.push("codex app-server: this command's stdin is relayed to it".into());
    }
    Ok(LaunchRequest {
        server_id: state.identity.workspace_id.clone(),
        agent_id: profile.profile.agent_id,
        options,
        env,
        notices,
    })
}

fn refusal(error: &LaunchError) -> ActionError {
    let code = match error {
        LaunchError::TooManyRuntimes => ErrorCode::AdmissionLimited,
        LaunchError::SessionRunning(_) | LaunchError::SessionBusy(_) => ErrorCode::InvalidState,
        LaunchError::Spawn { .. } => ErrorCode::ValidationFailed,
        LaunchError::Credential(_) | LaunchError::Memory(_) | LaunchError::ShuttingDown => {
            ErrorCode::InternalError
        }
    };
    if let LaunchError::Credential(_) | LaunchError::Memory(_) = error {
        tracing::error!(incident_id = wire::observe::incident_id().unwrap_or_default(), %error, cause = ?std::error::Error::source(error), "launch aborted");
    }
    // The cause says which file or directory and why (a full disk, a loosened mode); an I/O
    // error holds no file contents.
    let message = match error {
        LaunchError::Spawn { program, source } => format!("cannot start `{program}`: {source}"),
        LaunchError::Credential(source) | LaunchError::Memory(source) => {
            format!("{error}: {source}")
        }
        other => other.to_string(),
    };
    ActionError::new(code, message)
}

//! No runtime acts as its person: from inside `agentteam run`, the commands that act as the
//! person or the operator are refused, whichever way they go (the CLI to the embedded server,
//! the operator token read from the state directory and sent by hand, the daemon's admin API,
//! the CLI to a server named by its URL), while reads of the daemon still answer and the same
//! commands from the person's own shell act.

use serde_json::Value;

use super::support::*;

const REFUSED: &str = "a runtime may not act as its person or as the operator";

/// The output of `agentteam run … -- sh -c SCRIPT` (stdout and stderr of the script together),
/// once the runtime ended.
pub(crate) async fn run_script(
    daemon: &TestDaemon,
    agent: &str,
    script: &str,
    env: &[(&str, &str)],
) -> String {
    let path = format!(
        "{}:{}",
        std::path::Path::new(bin()).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("exec 2>&1\n{script}");
    let output = daemon
        .cli(&["run", "--agent", agent, "--", "sh", "-c", &script])
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "the runtime failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The text between `BEGIN name` and `END name` lines of `output`.
pub(crate) fn section<'a>(output: &'a str, name: &str) -> &'a str {
    let begin = format!("BEGIN {name}\n");
    let end = format!("END {name}");
    let start = output
        .find(&begin)
        .unwrap_or_else(|| panic!("no section {name} in:\n{output}"))
        + begin.len();
    let stop = output[start..].find(&end).expect("the section ends") + start;
    &output[start..stop]
}

/// A runtime requests an approval and then tries to approve it itself, every way a same-user
/// shell can: `agentteam admin decide`, the operator token from the state directory sent to the
/// embedded server by hand, and the daemon's admin API (`agentteam agent add`). Each is refused,
/// naming the run; `agentteam status` (a read) answers; the approval stays pending. From the
/// person's shell the same `admin decide` approves it, and the runtime's `approval get` says so.
#[tokio::test]
async fn a_runtime_cannot_approve_its_own_request() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("builder").await;
    let identity: Value =
        serde_json::from_slice(&std::fs::read(daemon.state_dir.join("identity.json")).unwrap())
            .unwrap();
    let (workspace, human) = (
        identity["workspaceId"].as_str().unwrap(),
        identity["humanId"].as_str().unwrap(),
    );
    let state = daemon.state_dir.display().to_string();
    let server = &daemon.server_url;
    let script = format!(
        r#"id() {{ sed -e 's/.*"id":"\([^"]*\)".*/\1/'; }}
A=$(agentteam exec approval request '{{"title":"Deploy to production","requestId":"req-self-approval-01"}}' | id)
echo "approval=$A"
echo "BEGIN admin"
agentteam admin decide --state-dir '{state}' --workspace {workspace} --approval "$A" --human {human} --decision approve
echo "exit=$?"
echo "END admin"
echo "BEGIN by-hand"
python3 - "$A" <<'PY'
import json, sys, urllib.request, urllib.error
token = open('{state}/operator.token').read().strip()
request = urllib.request.Request(
    '{server}/admin/workspaces/{workspace}/approvals/' + sys.argv[1] + '/decision',
    data=json.dumps({{"humanId": "{human}", "decision": "approve"}}).encode(),
    headers={{"Authorization": "Bearer " + token, "Content-Type": "application/json"}},
)
try:
    answer = urllib.request.urlopen(request)
    print(answer.status, answer.read().decode())
except urllib.error.HTTPError as refused:
    print(refused.code, refused.read().decode())
PY
echo "END by-hand"
echo "BEGIN agent-add"
agentteam agent add --state-dir '{state}' helper
echo "exit=$?"
echo "END agent-add"
echo "BEGIN wakers"
agentteam agent wakers --state-dir '{state}' builder --allow ada
echo "exit=$?"
echo "END wakers"
echo "BEGIN status"
agentteam status --state-dir '{state}' --json > /dev/null
echo "exit=$?"
echo "END status"
echo "BEGIN get"
agentteam exec approval get "{{\"approvalId\":\"$A\"}}"
echo "END get"
"#
    );
    let output = run_script(&daemon, "builder", &script, &[]).await;
    let approval = output
        .lines()
        .find_map(|line| line.strip_prefix("approval="))
        .expect("the runtime requested an approval")
        .to_string();
    assert!(approval.starts_with("apr_"), "{output}");

    let admin = section(&output, "admin");
    assert!(admin.contains(REFUSED), "{admin}");
    assert!(
        admin.contains("a process of run `run"),
        "the refusal names the run: {admin}"
    );
    assert!(!admin.contains("exit=0"), "{admin}");

    let by_hand = section(&output, "by-hand");
    assert!(by_hand.starts_with("403 "), "{by_hand}");
    let envelope: Value = serde_json::from_str(by_hand[4..].trim()).unwrap();
    assert_eq!(envelope["error"]["code"], "forbidden", "{envelope}");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap()
            .contains(REFUSED),
        "{envelope}"
    );

    let agent_add = section(&output, "agent-add");
    assert!(agent_add.contains(REFUSED), "{agent_add}");
    assert!(!agent_add.contains("exit=0"), "{agent_add}");
    // Nor may it let anyone wake its agent.
    let wakers = section(&output, "wakers");
    assert!(wakers.contains(REFUSED), "{wakers}");
    assert!(!wakers.contains("exit=0"), "{wakers}");
    assert!(section(&output, "status").contains("exit=0"), "{output}");

    let seen: Value = serde_json::from_str(section(&output, "get").trim()).unwrap();
    assert_eq!(seen["data"]["approval"]["status"], "pending", "{seen}");
    let agents = daemon.admin_get("agents").await;
    assert!(
        !agents.to_string().contains("\"helper\""),
        "the runtime's `agent add` added an agent: {agents}"
    );

    // The person, from their own shell, while a runtime runs (so the daemon does look at who
    // calls): the same commands act.
    let mut live = daemon.launch("builder", &[], "echo ready; exec sleep 300");
    assert_eq!(live.line().await, "ready");
    let runs = daemon.admin_get("runs").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    let added = daemon
        .cli(&["agent", "add", "helper"])
        .output()
        .await
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let decided = tokio::process::Command::new(bin())
        .args([
            "admin",
            "--json",
            "decide",
            "--state-dir",
            &state,
            "--no-start",
            "--workspace",
            workspace,
            "--approval",
            &approval,
            "--human",
            human,
            "--decision",
            "approve",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        decided.status.success(),
        "{}",
        String::from_utf8_lossy(&decided.stderr)
    );
    let decided: Value = serde_json::from_slice(&decided.stdout).unwrap();
    assert_eq!(decided["approval"]["status"], "approved", "{decided}");
    live.child.kill().await.unwrap();
    let output = run_script(
        &daemon,
        "builder",
        &format!(
            "echo 'BEGIN get'; agentteam exec approval get '{{\"approvalId\":\"{approval}\"}}'; echo 'END get'"
        ),
        &[],
    )
    .await;
    let seen: Value = serde_json::from_str(section(&output, "get").trim()).unwrap();
    assert_eq!(seen["data"]["approval"]["status"], "approved", "{seen}");
    assert_eq!(
        seen["data"]["approval"]["decidedByHumanId"], human,
        "{seen}"
    );
}

/// A process the runtime started in a process group of its own is still the runtime's (its
/// ancestry reaches the run), and so is one whose parent ended (its group is the run's).
#[tokio::test]
async fn a_runtime_process_in_another_group_or_orphaned_is_still_the_runtimes() {
    let daemon = TestDaemon::start(&[]).await;
    daemon.add_agent("builder").await;
    let state = daemon.state_dir.display().to_string();
    let script = format!(
        r#"work=$(mktemp -d); cd "$work"
echo "BEGIN own-group"
python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp("agentteam", ["agentteam", "agent", "add", "--state-dir", sys.argv[1], "helper"])' '{state}'
echo "exit=$?"
echo "END own-group"
echo "BEGIN orphan"
mkfifo done
( ( agentteam agent add --state-dir '{state}' helper > orphan.out 2>&1; echo "exit=$?" >> orphan.out; echo > done ) & )
read _ < done
cat orphan.out
echo "END orphan"
cd / && rm -rf "$work"
"#
    );
    let output = run_script(&daemon, "builder", &script, &[]).await;
    for name in ["own-group", "orphan"] {
        let text = section(&output, name);
        assert!(text.contains(REFUSED), "{name}: {text}");
        assert!(!text.contains("exit=0"), "{name}: {text}");
    }
}

/// `agentteam admin` against a server named by its URL: the server cannot tell local processes
/// apart, so the CLI asks the local daemon, which refuses a runtime's process; the person's own
/// shell is answered.
#[tokio::test]
async fn a_runtime_cannot_act_as_the_operator_of_a_named_server() {
    let root = tempfile::tempdir().unwrap();
    let server_dir = root.path().join("server");
    std::fs::create_dir_all(&server_dir).unwrap();
    let (_server, server_url, _) = spawn_server(&server_dir).await;
    let token_file = server_dir.join("operator.token").display().to_string();
    // The daemon's state directory is the default one of this environment, as it is for a
    // person who runs `agentteam daemon` with no flags.
    let xdg = root.path().join("xdg");
    let xdg_env = [("XDG_STATE_HOME", xdg.to_str().unwrap())];
    let daemon = TestDaemon::start_at(
        &xdg.join("agentteam"),
        root.path(),
        &[
            "--server-url",
            &server_url,
            "--operator-token-file",
            &token_file,
        ],
        &xdg_env,
    )
    .await;
    daemon.add_agent("builder").await;
    let script = format!(
        r#"echo "BEGIN admin"
agentteam admin workspace --server-url '{server_url}' --operator-token-file '{token_file}' --name stolen
echo "exit=$?"
echo "END admin"
"#
    );
    let output = run_script(&daemon, "builder", &script, &xdg_env).await;
    let admin = section(&output, "admin");
    assert!(admin.contains(REFUSED), "{admin}");
    assert!(!admin.contains("exit=0"), "{admin}");

    let mine = tokio::process::Command::new(bin())
        .args([
            "admin",
            "workspace",
            "--server-url",
            &server_url,
            "--operator-token-file",
            &token_file,
            "--name",
            "mine",
        ])
        .envs(xdg_env)
        .output()
        .await
        .unwrap();
    assert!(
        mine.status.success(),
        "{}",
        String::from_utf8_lossy(&mine.stderr)
    );
    assert!(
        String::from_utf8_lossy(&mine.stdout).contains("wsp_"),
        "{}",
        String::from_utf8_lossy(&mine.stdout)
    );
}

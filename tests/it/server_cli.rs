//! `agentteam server`'s command line: what it refuses before it starts, and that no refusal
//! repeats a secret it was given.

use crate::support::agentteam;

#[test]
fn a_password_in_a_postgres_url_is_refused_without_being_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("operator.token");
    let run = agentteam(&[
        "server",
        "--database",
        "postgres://agentteam:hunter2-secret@127.0.0.1:1/agentteam",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("carries a password"), "{}", run.stderr);
    assert!(run.stderr.contains("PGPASSFILE"), "{}", run.stderr);
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    assert!(!token.exists(), "nothing was started");
}

#[test]
fn postgres_replicas_must_name_their_shared_token_file() {
    let run = agentteam(&[
        "server",
        "--database",
        "postgres://agentteam@127.0.0.1:1/agentteam",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("`--operator-token-file` is required with a PostgreSQL database"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unreachable_database_and_an_unknown_scheme_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("operator.token");
    let run = agentteam(&[
        "server",
        "--database",
        "postgres://agentteam@127.0.0.1:1/agentteam",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("error: cannot open the database"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("caused by:"), "{}", run.stderr);

    let run = agentteam(&[
        "server",
        "--database",
        "mysql://root:topsecret@db.example/agentteam",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("unsupported database url scheme `mysql`"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("topsecret"), "{}", run.stderr);

    let run = agentteam(&[
        "server",
        "--database",
        "sqlite::memory:",
        "--operator-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("an in-memory SQLite database keeps nothing once the server stops"),
        "{}",
        run.stderr
    );
}

/// sqlx reads a `password` from the query (decoded: `pass%77ord` is `password` too) and logs any
/// parameter it does not know with its value: only secret-free parameters pass, refused by name.
#[test]
fn a_secret_in_a_postgres_query_is_refused_by_its_name_alone() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("operator.token");
    for (database, named) in [
        (
            "postgres://agentteam@127.0.0.1:1/agentteam?password=hunter2-secret",
            "`password`",
        ),
        (
            "postgres://agentteam@127.0.0.1:1/agentteam?sslmode=require&pass%77ord=hunter2-secret",
            "`password`",
        ),
        (
            "postgres://agentteam@127.0.0.1:1/agentteam?sslpassword=hunter2-secret",
            "`sslpassword`",
        ),
    ] {
        let run = agentteam(&[
            "server",
            "--database",
            database,
            "--operator-token-file",
            token.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 2, "{database}: {}", run.stderr);
        assert!(run.stderr.contains(named), "{database}: {}", run.stderr);
        assert!(run.stderr.contains("PGPASSWORD"), "{}", run.stderr);
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
        assert!(!token.exists(), "nothing was started");
    }
}

/// A proxy password never travels on the command line: a proxy URL with user info is refused,
/// and the refusal names the file that takes it instead.
#[test]
fn a_proxy_url_with_user_info_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("operator.token");
    let server = agentteam(&[
        "server",
        "--database",
        &format!("sqlite://{}", dir.path().join("server.db").display()),
        "--operator-token-file",
        token.to_str().unwrap(),
        "--provider-proxy",
        "socks5h://ops:hunter2@127.0.0.1:1080",
    ]);
    let daemon = agentteam(&[
        "daemon",
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
        "--server-url",
        "https://agentteam.example",
        "--operator-token-file",
        token.to_str().unwrap(),
        "--server-proxy",
        "http://ops:hunter2@proxy.internal:3128",
    ]);
    for (run, flag) in [(server, "--provider-proxy"), (daemon, "--server-proxy")] {
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains("must not carry user info"),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.contains(&format!("`{flag}-credential-file`")),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    }
    assert!(!token.exists(), "nothing was started");
}

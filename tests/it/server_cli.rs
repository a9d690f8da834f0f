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
}

//! The one integration test binary: every module drives the real `agentteam` binary, the real
//! generator, or a real daemon and server on `127.0.0.1:0` over real SQLite files (see
//! `support.rs`), through real HTTP, the real CLI and real runtime processes.

mod admin_cli;
mod agent_profiles;
mod catalog_invariants;
mod cli_surfaces;
mod codegen_pipeline;
mod completions;
mod console;
mod daemon_credentials;
mod daemon_external;
mod daemon_lifecycle;
mod deliveries;
mod delivery_faults;
mod exactly_once;
mod exec_transport;
mod fault_proxy;
mod faults;
mod fixture_build;
mod generated_fresh;
mod knowledge;
mod local_cli;
mod login_service;
mod mcp;
mod off_contract;
mod openapi_fuzz;
mod operation_matrix;
mod person;
mod pg_replicas;
mod provider_stub;
mod proxies;
mod reader;
mod readme;
mod runtime_boundary;
mod runtime_deliveries;
mod runtime_drivers;
mod runtime_harness;
mod schema_lint;
mod serve_loop;
mod server_actions;
mod server_audit;
mod server_cli;
mod server_client;
mod server_deliveries;
mod server_domains;
mod server_durability;
mod server_extensions;
mod server_human;
mod server_idempotency;
mod server_knowledge;
mod server_pagination;
mod server_readable;
mod server_workflow;
mod support;
mod tidy;
mod traces;

/// The generator itself, exactly as `build.rs` runs it (minus the typify step).
#[allow(dead_code)]
#[path = "../../codegen/mod.rs"]
mod codegen;

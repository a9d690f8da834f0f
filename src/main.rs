//! The `agentteam` binary: parse the command line and run it.

fn main() -> std::process::ExitCode {
    agentteam::cli::main()
}

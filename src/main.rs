//! The `agentteam` binary: parse the command line and run it.

/// mimalloc instead of glibc's malloc: a request allocates and frees many small JSON values, and
/// glibc's allocator was a fifth of a history read's samples (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agentteam::cli::main()
}

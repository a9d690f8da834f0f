//! The `agentteam` binary: parse the command line and run it.

/// mimalloc instead of glibc's malloc: a request allocates and frees many small JSON values, and
/// that churn is cheaper under mimalloc than under glibc's allocator (BENCHMARKS.md has the
/// profiles).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

agentteam::huge_pages_off_before_the_allocator!();

fn main() -> std::process::ExitCode {
    agentteam::cli::main()
}

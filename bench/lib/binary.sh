# Sourced by the benchmarks that compare commits (bench/ab.sh, bench/paired.sh), from the
# repository's root.

# agentteam_binary COMMIT|PATH: prints the release binary of COMMIT (any form git rev-parse
# takes), built once in a detached worktree under target/ab/ with its own target directory under
# target/ab-target/ (cargo's output on stderr); or PATH itself when it is an executable file.
agentteam_binary() {
    if [ -f "$1" ] && [ -x "$1" ]; then
        echo "$1"
        return
    fi
    local root=$PWD commit tree
    commit="$(git rev-parse --verify "$1^{commit}")"
    tree="$root/target/ab/$commit"
    [ -d "$tree" ] || git worktree add --detach --quiet "$tree" "$commit"
    (cd "$tree" && CARGO_TARGET_DIR="$root/target/ab-target/$commit" cargo build --release --quiet --locked) >&2
    echo "$root/target/ab-target/$commit/release/agentteam"
}

#!/usr/bin/env bash
# Clean release build time and binary size of two commits, each in its own worktree and its own
# empty target directory (nothing shared but the downloaded crates), one after the other.
#
# Usage: bench/build_cost.sh BASE [HEAD]   (HEAD defaults to the working tree as it is)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench/build_cost.sh BASE [HEAD]}
head=${2:-}
work="$(mktemp -d)"
cleanup() {
    git worktree remove --force "$work/base" 2>/dev/null || true
    [ -z "$head" ] || git worktree remove --force "$work/head" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cargo fetch --locked --quiet
git worktree add --quiet --detach "$work/base" "$base"
if [ -n "$head" ]; then
    git worktree add --quiet --detach "$work/head" "$head"
    head_dir="$work/head"
else
    head_dir="$PWD"
fi
# measure NAME DIR: a clean release build of DIR; prints "NAME SECONDS BYTES".
measure() {
    local name=$1 dir=$2 target="$work/target-$1"
    local started
    started=$(date +%s.%N)
    (cd "$dir" && CARGO_TARGET_DIR="$target" cargo build --release --locked --quiet --offline)
    python3 -c "import os, sys, time; print(sys.argv[1], f'{time.time() - float(sys.argv[2]):.0f}', os.path.getsize(sys.argv[3]))" \
        "$name" "$started" "$target/release/agentteam"
}
measure base "$work/base" | tee "$work/base.txt"
measure head "$head_dir" | tee "$work/head.txt"
python3 - "$work/base.txt" "$work/head.txt" "$base" "${head:-working tree}" <<'PY'
import sys
base, head = (open(p).read().split() for p in sys.argv[1:3])
print(f"clean release build: {sys.argv[3]} {base[1]} s, {sys.argv[4]} {head[1]} s "
      f"({int(head[1]) - int(base[1]):+d} s, ratio {int(head[1]) / int(base[1]):.2f})")
print(f"binary size: {sys.argv[3]} {int(base[2]) / 1e6:.2f} MB, {sys.argv[4]} {int(head[2]) / 1e6:.2f} MB "
      f"({(int(head[2]) - int(base[2])) / 1e6:+.2f} MB)")
PY

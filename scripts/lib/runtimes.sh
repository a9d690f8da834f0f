# Sourced by scripts/test: the agent runtimes the driver tests launch, from the npm registry at
# pinned versions, installed once under target/test-tools/runtimes-<versions> (with their
# platform binaries), and exported as AGENTTEAM_TEST_{CLAUDE,CODEX,OPENCODE,KIMI,COPILOT,GEMINI};
# and ccusage, the peer `agentteam token analyze`'s totals are compared with (AGENTTEAM_TEST_CCUSAGE;
# 20.0.24: 20.0.26's Linux binary is not published).
# Needs ensure_node (scripts/lib/node.sh) first; Kimi Code needs its Node 22.19 or later.
claude_version=2.1.332
codex_version=0.171.0
opencode_version=1.18.33
kimi_code_version=2.1.0
copilot_version=1.0.102
gemini_version=0.61.0
ccusage_version=20.0.24

# npm_runtime DIR WHAT AFTER PACKAGE...: installs the packages into DIR unless a whole install is
# there (DIR/.installed), then runs AFTER DIR when it names a function.
npm_runtime() {
    local dir=$1 what=$2 after=$3
    shift 3
    if [ -f "$dir/.installed" ]; then
        return
    fi
    echo "$(basename "$0"): installing $what into $dir" >&2
    mkdir -p "$dir"
    (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$@" >/dev/null)
    if [ -n "$after" ]; then
        "$after" "$dir"
    fi
    touch "$dir/.installed"
}

# Copilot CLI unpacks its real program (235 MB) into $XDG_CACHE_HOME/copilot on its first run:
# done here once, and the tests point XDG_CACHE_HOME at it.
unpack_copilot() {
    XDG_CACHE_HOME="$1/cache" HOME="$1" COPILOT_AUTO_UPDATE=false \
        "$1/node_modules/.bin/copilot" --version >/dev/null
}

ensure_runtimes() {
    local dir="$test_tools/runtimes-claude-$claude_version-codex-$codex_version-opencode-$opencode_version"
    npm_runtime "$dir" "Claude Code $claude_version, Codex $codex_version and OpenCode $opencode_version" "" \
        "@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version" "opencode-ai@$opencode_version"
    export AGENTTEAM_TEST_CLAUDE="$dir/node_modules/.bin/claude"
    export AGENTTEAM_TEST_CODEX="$dir/node_modules/.bin/codex"
    export AGENTTEAM_TEST_OPENCODE="$dir/node_modules/.bin/opencode"
    local kimi="$test_tools/runtimes-kimi-code-$kimi_code_version"
    npm_runtime "$kimi" "Kimi Code $kimi_code_version" "" "@moonshot-ai/kimi-code@$kimi_code_version"
    export AGENTTEAM_TEST_KIMI="$kimi/node_modules/.bin/kimi"
    local copilot="$test_tools/runtimes-copilot-$copilot_version"
    npm_runtime "$copilot" "Copilot CLI $copilot_version" unpack_copilot "@github/copilot@$copilot_version"
    export AGENTTEAM_TEST_COPILOT="$copilot/node_modules/.bin/copilot"
    export AGENTTEAM_TEST_COPILOT_CACHE="$copilot/cache"
    local gemini="$test_tools/runtimes-gemini-$gemini_version"
    npm_runtime "$gemini" "Gemini CLI $gemini_version" "" "@google/gemini-cli@$gemini_version"
    export AGENTTEAM_TEST_GEMINI="$gemini/node_modules/.bin/gemini"
    local ccusage="$test_tools/ccusage-$ccusage_version"
    npm_runtime "$ccusage" "ccusage $ccusage_version" "" "ccusage@$ccusage_version"
    export AGENTTEAM_TEST_CCUSAGE="$ccusage/node_modules/.bin/ccusage"
}

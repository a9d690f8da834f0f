# Sourced by scripts/test: the agent runtimes the driver tests launch, from the npm registry at
# pinned versions, installed once under target/test-tools/runtimes-<versions> (with their
# platform binaries), and exported as AGENTTEAM_TEST_{CLAUDE,CODEX,OPENCODE,KIMI}. Needs
# ensure_node (scripts/lib/node.sh) first; Kimi Code needs its Node 22.19 or later.
claude_version=2.1.332
codex_version=0.171.0
opencode_version=1.18.33
kimi_code_version=2.1.0

ensure_runtimes() {
    local dir="$test_tools/runtimes-claude-$claude_version-codex-$codex_version-opencode-$opencode_version"
    if [ ! -f "$dir/.installed" ]; then
        echo "$(basename "$0"): installing Claude Code $claude_version, Codex $codex_version and OpenCode $opencode_version into $dir" >&2
        mkdir -p "$dir"
        (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error \
            "@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version" \
            "opencode-ai@$opencode_version" >/dev/null)
        touch "$dir/.installed"
    fi
    export AGENTTEAM_TEST_CLAUDE="$dir/node_modules/.bin/claude"
    export AGENTTEAM_TEST_CODEX="$dir/node_modules/.bin/codex"
    export AGENTTEAM_TEST_OPENCODE="$dir/node_modules/.bin/opencode"
    local kimi="$test_tools/runtimes-kimi-code-$kimi_code_version"
    if [ ! -f "$kimi/.installed" ]; then
        echo "$(basename "$0"): installing Kimi Code $kimi_code_version into $kimi" >&2
        mkdir -p "$kimi"
        (cd "$kimi" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error \
            "@moonshot-ai/kimi-code@$kimi_code_version" >/dev/null)
        touch "$kimi/.installed"
    fi
    export AGENTTEAM_TEST_KIMI="$kimi/node_modules/.bin/kimi"
}

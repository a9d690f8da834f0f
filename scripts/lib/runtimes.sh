# Sourced by scripts/test: the agent runtimes the driver tests launch, from the npm registry at
# pinned versions, installed once under target/test-tools/runtimes-<versions> (with their
# platform binaries), and exported as AGENTTEAM_TEST_{CLAUDE,CODEX,OPENCODE,KIMI,COPILOT,GEMINI}. Needs
# ensure_node (scripts/lib/node.sh) first; Kimi Code needs its Node 22.19 or later.
claude_version=2.1.332
codex_version=0.171.0
opencode_version=1.18.33
kimi_code_version=2.1.0
copilot_version=1.0.102
gemini_version=0.61.0

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
    # Copilot CLI unpacks its real program (235 MB) into $XDG_CACHE_HOME/copilot on its first run:
    # done here once, and the tests point XDG_CACHE_HOME at it.
    local copilot="$test_tools/runtimes-copilot-$copilot_version"
    if [ ! -f "$copilot/.installed" ]; then
        echo "$(basename "$0"): installing Copilot CLI $copilot_version into $copilot" >&2
        mkdir -p "$copilot"
        (cd "$copilot" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error \
            "@github/copilot@$copilot_version" >/dev/null)
        XDG_CACHE_HOME="$copilot/cache" HOME="$copilot" COPILOT_AUTO_UPDATE=false \
            "$copilot/node_modules/.bin/copilot" --version >/dev/null
        touch "$copilot/.installed"
    fi
    export AGENTTEAM_TEST_COPILOT="$copilot/node_modules/.bin/copilot"
    export AGENTTEAM_TEST_COPILOT_CACHE="$copilot/cache"
    local gemini="$test_tools/runtimes-gemini-$gemini_version"
    if [ ! -f "$gemini/.installed" ]; then
        echo "$(basename "$0"): installing Gemini CLI $gemini_version into $gemini" >&2
        mkdir -p "$gemini"
        (cd "$gemini" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error \
            "@google/gemini-cli@$gemini_version" >/dev/null)
        touch "$gemini/.installed"
    fi
    export AGENTTEAM_TEST_GEMINI="$gemini/node_modules/.bin/gemini"
}

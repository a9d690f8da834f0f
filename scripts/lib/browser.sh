# Sourced by scripts/test: what the console's browser tests drive. Debian's Chromium is
# installed by scripts/test with the other Debian packages (as root); playwright-core drives it
# (it downloads no browser of its own) and axe-core checks each page's accessibility, both from
# the npm registry at pinned versions, installed once under target/test-tools. Exported:
# AGENTTEAM_TEST_BROWSER_MODULES (their node_modules) and AGENTTEAM_TEST_CHROMIUM.
# Needs ensure_node (scripts/lib/node.sh) and npm_runtime (scripts/lib/runtimes.sh) first.
playwright_core_version=1.65.2
axe_core_version=4.14.1

ensure_browser() {
    local dir="$test_tools/browser-playwright-core-$playwright_core_version-axe-core-$axe_core_version"
    npm_runtime "$dir" "playwright-core $playwright_core_version and axe-core $axe_core_version" "" \
        "playwright-core@$playwright_core_version" "axe-core@$axe_core_version"
    export AGENTTEAM_TEST_BROWSER_MODULES="$dir/node_modules"
    # The binary itself, not /usr/bin/chromium (a wrapper script that adds flags of its own).
    if [ -x /usr/lib/chromium/chromium ]; then
        export AGENTTEAM_TEST_CHROMIUM=/usr/lib/chromium/chromium
    fi
}

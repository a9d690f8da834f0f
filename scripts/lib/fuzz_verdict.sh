# Sourced by scripts/fuzz: the verdict on one target's run.
#
# fuzz_verdict STATUS RUNS: `ok` when libFuzzer exited 0 having run at least one input, `idle`
# when it exited 0 having run none (its binary or corpus is broken: a failure, not a clean run),
# `failed` otherwise. RUNS is libFuzzer's `stat::number_of_executed_units` (empty when missing).
fuzz_verdict() {
    local status=$1 runs=$2
    if [ "$status" -ne 0 ]; then
        echo failed
    elif [[ "$runs" =~ ^[0-9]+$ ]] && [ "$runs" -gt 0 ]; then
        echo ok
    else
        echo idle
    fi
}

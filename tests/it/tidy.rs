//! House rules as tests: every hand-written Rust file opens with a `//!` line saying what it owns.

use std::path::Path;

use crate::support::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let root = repo_root();
    let mut files = vec![root.join("build.rs")];
    for dir in ["src", "codegen", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let missing: Vec<String> = files
        .iter()
        .filter(|file| !std::fs::read_to_string(file).unwrap().starts_with("//!"))
        .map(|file| file.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` module doc: {missing:?}"
    );
}

/// The secret scanner the daemon tests run over every daemon log really finds each shape.
#[test]
fn the_log_secret_scanner_finds_every_secret_shape() {
    let token = format!("v1.{}.{}", "eyJhIjoiYXoxIiwiZyI6MX0", "A".repeat(43));
    let device = format!("dev_01M8MW93F5VQB87BZREWC35R3D.{}", "b".repeat(43));
    let operator = format!("ato_{}", "c".repeat(43));
    let admin = format!("adm_{}", "0123456789abcdef".repeat(2));
    for secret in [&token, &device, &operator, &admin] {
        let log = format!("2026-11-30 WARN something happened value={secret} and more");
        assert_eq!(crate::support::secret_shapes(&log), vec![secret.clone()]);
    }
    assert!(
        crate::support::secret_shapes(
            "authorization=az3f generation=2 class=\"expired\" dev_01M8 v1.short"
        )
        .is_empty()
    );
}

/// A module of `src/`, by its path (`crate::daemon::mcp::era`), and its file.
struct Module {
    path: String,
    file: std::path::PathBuf,
}

fn src_modules() -> Vec<Module> {
    let src = repo_root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            parts.insert(0, "crate".into());
            Module {
                path: parts.join("::"),
                file,
            }
        })
        .collect()
}

/// The text of a file before its `#[cfg(test)]` module: what the code itself depends on.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

/// Every module `module` names through a `crate::`, `super::` or `self::` path (in a `use` or
/// inline): the module that defines the longest prefix of the path.
fn imports(
    module: &Module,
    known: &std::collections::BTreeSet<String>,
) -> std::collections::BTreeSet<String> {
    let code = code_of(&module.file);
    let base: Vec<&str> = module.path.split("::").collect();
    let mut found = std::collections::BTreeSet::new();
    let mut resolve = |path: &str| {
        let mut segments: Vec<&str> = path.split("::").collect();
        let mut current: Vec<&str> = match segments.first() {
            Some(&"crate") => {
                segments.remove(0);
                vec!["crate"]
            }
            Some(&"super") => {
                let mut current = base.clone();
                while segments.first() == Some(&"super") {
                    segments.remove(0);
                    current.pop();
                }
                current
            }
            Some(&"self") => {
                segments.remove(0);
                base.clone()
            }
            _ => return,
        };
        let mut best = None;
        for segment in std::iter::once(None).chain(segments.iter().map(Some)) {
            if let Some(segment) = segment {
                current.push(segment);
            }
            let candidate = current.join("::");
            if known.contains(&candidate) {
                best = Some(candidate);
            }
        }
        if let Some(best) = best.filter(|b| *b != module.path) {
            found.insert(best);
        }
    };
    // `use a::{b, c::d}` groups expand to each path; other paths are read as they stand.
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut rest = code.as_str();
    while let Some(start) = rest.find(['c', 's']) {
        let candidate = &rest[start..];
        let boundary = start == 0 || !word(rest[..start].chars().last().unwrap());
        let prefixed = ["crate::", "super::", "self::"]
            .iter()
            .any(|p| candidate.starts_with(p));
        if boundary && prefixed {
            let length = candidate
                .find(|c: char| !word(c))
                .unwrap_or(candidate.len());
            let path = candidate[..length].trim_end_matches(':');
            if candidate[length..].starts_with('{') {
                let group_end = candidate[length..]
                    .find('}')
                    .map_or(candidate.len(), |e| length + e);
                for item in candidate[length + 1..group_end].split(',') {
                    let item = item
                        .split(" as ")
                        .next()
                        .unwrap()
                        .trim()
                        .trim_start_matches('{');
                    if !item.is_empty() {
                        resolve(&format!("{path}::{item}"));
                    }
                }
            } else {
                resolve(path);
            }
            rest = &candidate[length..];
        } else {
            rest = &candidate[1..];
        }
    }
    found
}

/// The modules of `src/` import each other without a cycle (counting every
/// `crate::`/`super::`/`self::` path): no module imports the module that mounts it.
#[test]
fn no_import_cycle_between_src_files() {
    let modules = src_modules();
    let known: std::collections::BTreeSet<String> =
        modules.iter().map(|m| m.path.clone()).collect();
    let edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.path.clone(), imports(m, &known)))
        .collect();
    // Depth-first search for a back edge; report the cycle it closes.
    fn visit(
        node: &str,
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    for module in edges.keys() {
        if let Some(cycle) = visit(module, &edges, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
    // The check is real: it sees the edges it must see.
    assert!(edges["crate::daemon::routes"].contains("crate::daemon::exec"));
    assert!(edges["crate::daemon::exec"].contains("crate::daemon::state"));
}

/// The code a runtime runs (`agentteam exec` and its transport) does not depend on the daemon:
/// it is the client side of the bridge, built from the contract alone.
#[test]
fn runtime_side_clients_do_not_import_the_daemon() {
    let modules = src_modules();
    let known: std::collections::BTreeSet<String> =
        modules.iter().map(|m| m.path.clone()).collect();
    for module in modules.iter().filter(|m| {
        [
            "crate::cli::exec",
            "crate::cli::transport",
            "crate::cli::runtime_url",
            "crate::cli::mcp",
        ]
        .contains(&m.path.as_str())
    }) {
        let daemon: Vec<String> = imports(module, &known)
            .into_iter()
            .filter(|target| target.starts_with("crate::daemon"))
            .collect();
        assert!(daemon.is_empty(), "{} imports {daemon:?}", module.path);
    }
}

/// ARCHITECTURE.md's codemap names every module of `src/` (by its file path).
#[test]
fn the_codemap_names_every_src_module() {
    let architecture = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    let src = repo_root().join("src");
    let missing: Vec<String> = src_modules()
        .iter()
        .map(|m| m.file.strip_prefix(&src).unwrap().display().to_string())
        .filter(|file| {
            // `a/b/c.rs` is named as `c.rs`, `b/c.rs`, `a/b/c.rs` or `src/a/b/c.rs`; a
            // `a/b/mod.rs` as `b/`, `a/b/` or `src/a/b/`.
            let (stem, directory) = match file.strip_suffix("/mod.rs") {
                Some(dir) => (format!("src/{dir}"), true),
                None => (format!("src/{file}"), false),
            };
            let parts: Vec<&str> = stem.split('/').collect();
            !(0..parts.len()).any(|from| {
                let suffix = parts[from..].join("/");
                let name = if directory {
                    format!("`{suffix}/`")
                } else {
                    format!("`{suffix}`")
                };
                architecture.contains(&name)
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name: {missing:?}"
    );
}

/// The repository owns everything its commands run: nothing refers to a `shared/` directory
/// beside the checkout.
#[test]
fn nothing_reads_outside_the_repository() {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in [
        "src",
        "codegen",
        "tests",
        "scripts",
        "conformance",
        "bench",
        ".ci",
        "docs",
    ] {
        collect_files(&root.join(dir), &mut files);
    }
    files.push(root.join("build.rs"));
    files.push(root.join("README.md"));
    let needle = ["..", "/shared"].concat();
    let offenders: Vec<String> = files
        .iter()
        .filter(|file| {
            std::fs::read(file).is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(&needle))
        })
        .map(|file| file.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these refer outside the repository: {offenders:?}"
    );
}

fn collect_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("target")
                && !path.ends_with("node_modules")
                && !path.ends_with("snapshots")
            {
                collect_files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// A build for a system the crate does not support stops at once with the reason: the guard is
/// the first item of `lib.rs`, and it names Linux as the one target. (Only Linux's standard
/// library is installed where the tests run, so the guard is read, not cross-built.)
#[test]
fn lib_rs_opens_with_a_guard_that_refuses_every_target_but_linux() {
    let lib = std::fs::read_to_string(repo_root().join("src/lib.rs")).unwrap();
    let code: Vec<&str> = lib
        .lines()
        .filter(|line| !line.starts_with("//!") && !line.trim().is_empty())
        .collect();
    assert_eq!(code[0], "#[cfg(not(target_os = \"linux\"))]", "{code:?}");
    assert_eq!(code[1], "compile_error!(", "{code:?}");
    let message = code[2..]
        .iter()
        .take_while(|line| !line.starts_with(");"))
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    for why in ["supports Linux only", "Windows DACL", "not implemented"] {
        assert!(message.contains(why), "{message}");
    }
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(
        readme.contains("## Platforms"),
        "the README says which systems are supported"
    );
}

/// The PostgreSQL pass of `scripts/test` names whole modules that exist, and README's "What runs
/// where" names the same ones: a renamed module cannot drop out of the pass unnoticed, nor a
/// module run in it unnamed.
#[test]
fn the_postgresql_pass_names_existing_modules_as_the_readme_says() {
    let script = std::fs::read_to_string(repo_root().join("scripts/test")).unwrap();
    let list = script
        .split("pg_modules=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("scripts/test lists `pg_modules`");
    let modules: Vec<&str> = list
        .split_whitespace()
        .map(|m| {
            m.strip_suffix("::")
                .expect("each entry is a whole module, `name::`")
        })
        .collect();
    let main = std::fs::read_to_string(repo_root().join("tests/it/main.rs")).unwrap();
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = readme
        .split("### What runs where")
        .nth(1)
        .expect("the README says what runs where");
    let section = section.split("\n## ").next().unwrap();
    for module in &modules {
        assert!(
            main.contains(&format!("mod {module};")),
            "`{module}` is no module"
        );
        let named = if module.starts_with("server_") {
            "`server_*`".to_string()
        } else {
            format!("`{module}`")
        };
        assert!(
            section.contains(&named),
            "README's pass does not name {named}"
        );
    }
    // README says every `server_*` module runs there: every one does.
    for line in main.lines() {
        if let Some(module) = line.strip_prefix("mod server_") {
            let module = format!("server_{}", module.trim_end_matches(';'));
            assert!(
                modules.contains(&module.as_str()),
                "`{module}` is not in the pass"
            );
        }
    }
    // A filter matches anywhere in a test's path: every module a filter picks is named itself.
    for line in main.lines() {
        let Some(module) = line.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) else {
            continue;
        };
        if let Some(filter) = modules.iter().find(|f| module.ends_with(*f)) {
            assert!(
                modules.contains(&module),
                "`{filter}::` picks `{module}`, which the pass does not name"
            );
        }
    }
    assert!(modules.len() >= 10, "{modules:?}");
}

/// Runs `script` in bash from the repository root; its exit code and what it printed.
fn bash(script: &str) -> (i32, String) {
    let output = std::process::Command::new("bash")
        .args(["-c", script])
        .current_dir(repo_root())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// A benchmark load with a socket error, a timeout, a lost audit record, an answer the trail does
/// not account for (fewer records than 2xx answers, a non-2xx answer that is not an audit
/// refusal, more records than the answers, the load's last in-flight requests and the stats
/// reads allow) is invalid: `load_valid` fails the script instead of letting a number through.
/// Each bound holds at its edge.
#[test]
fn an_invalid_benchmark_load_fails_the_script() {
    // `before` and `after`: the audit figures (`recorded`, `refused`, `dropped`, `reads`) the
    // server reports before the load and once it settled after it.
    // `human`: the human API requests (the daemon's event feed reads) before and after.
    let check_fed = |wrk: &str,
                     before: (i64, i64, i64, i64),
                     after: (i64, i64, i64, i64),
                     compete: bool,
                     human: (i64, i64)| {
        let stats = |(recorded, refused, dropped, reads): (i64, i64, i64, i64), human: i64| {
            format!(
                r#"{{"dropped": {dropped}, "recorded": {recorded}, "refused": {refused}, "waited": 0, "waitedMs": 0, "queued": 0, "maxLagMs": 5, "human": {human}, "reads": {reads}}}"#
            )
        };
        bash(&format!(
            r#"set -euo pipefail; work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
            . bench/lib/mcp_load.sh
            audit_settled() {{ echo '{after}'; }}
            {compete}
            printf '%s\n' '{wrk}' > "$work/x.wrk"
            load_valid x '{before}'"#,
            after = stats(after, human.1),
            before = stats(before, human.0),
            compete = if compete { "COMPETE=1" } else { "" },
        ))
    };
    let check = |wrk: &str, before, after, compete| check_fed(wrk, before, after, compete, (0, 0));
    let answers = "  1000 requests in 10.00s, 1.00MB read\nRequests/sec:  100.00";
    let valid = |wrk: &str, before, after, compete| {
        let (code, output) = check(wrk, before, after, compete);
        assert_eq!(code, 0, "{wrk}: {output}");
        assert!(output.contains("valid"), "{output}");
    };
    // 1000 answers, 1000 records: valid; up to 16 in flight and the 3 stats reads (the one before
    // the load and the two after it) more: still valid.
    valid(answers, (50, 0, 0, 1), (1050, 0, 0, 2), false);
    valid(answers, (50, 0, 0, 1), (50 + 1000 + 16 + 2, 0, 0, 2), false);
    // Beside a competing load, a refusal for want of audit room is counted, not invalid.
    let refused = "  1000 requests in 10.00s, 1.00MB read\n  Non-2xx or 3xx responses: 3";
    valid(refused, (0, 0, 0, 1), (997, 3, 0, 2), true);
    // The daemon's event feed reads are requests of their own, each recorded: 40 of them allow 40
    // records more, and no more than that.
    let fed = (1000 + 16 + 2 + 40, 0, 0, 2);
    let (code, output) = check_fed(answers, (0, 0, 0, 1), fed, false, (10, 50));
    assert_eq!(code, 0, "{output}");
    let (code, output) = check_fed(answers, (0, 0, 0, 1), fed, false, (10, 49));
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("1058 records for 1000 answers"), "{output}");
    for (wrk, before, after, compete, said) in [
        (
            "  Socket errors: connect 0, read 2, write 0, timeout 0",
            (0, 0, 0, 1),
            (0, 0, 0, 2),
            false,
            "Socket errors",
        ),
        (
            "  Socket errors: connect 0, read 0, write 0, timeout 7",
            (0, 0, 0, 1),
            (0, 0, 0, 2),
            false,
            "timeout 7",
        ),
        (
            answers,
            (0, 0, 3, 1),
            (1000, 0, 5, 2),
            false,
            "lost 2 audit records",
        ),
        (
            answers,
            (0, 0, 0, 1),
            (999, 0, 0, 2),
            false,
            "1000 answers served but 999 records",
        ),
        (
            answers,
            (0, 0, 0, 1),
            (1000 + 16 + 2 + 1, 0, 0, 2),
            false,
            "1019 records for 1000 answers",
        ),
        (
            refused,
            (0, 0, 0, 1),
            (1000, 0, 0, 2),
            true,
            "3 non-2xx answers but 0 audit refusals",
        ),
        (
            refused,
            (0, 0, 0, 1),
            (997, 3, 0, 2),
            false,
            "3 requests refused for want of audit room",
        ),
    ] {
        let (code, output) = check(wrk, before, after, compete);
        assert_eq!(code, 1, "{wrk}: {output}");
        assert!(
            output.contains("INVALID LOAD") && output.contains(said),
            "{said}: {output}"
        );
    }
}

/// A fuzz target that ran no input is a failure, not a clean run.
#[test]
fn a_fuzz_target_that_ran_nothing_fails() {
    for (status, runs, verdict) in [
        (0, "1234", "ok"),
        (0, "0", "idle"),
        (0, "", "idle"),
        (0, "?", "idle"),
        (1, "99", "failed"),
    ] {
        let (code, output) = bash(&format!(
            ". scripts/lib/fuzz_verdict.sh; fuzz_verdict {status} '{runs}'"
        ));
        assert_eq!((code, output.trim()), (0, verdict), "{status} {runs:?}");
    }
    let script = std::fs::read_to_string(repo_root().join("scripts/fuzz")).unwrap();
    assert!(
        script.contains("fuzz_verdict \"$status\""),
        "scripts/fuzz decides with it"
    );
}

/// Processes are ended by their own PID: nothing of the repository kills by name, and no
/// interpreter cache is committed.
#[test]
fn processes_are_ended_by_pid_and_no_cache_is_committed() {
    let (_, listed) = bash("git ls-files");
    let mut by_name = Vec::new();
    for file in listed.lines() {
        if file.contains("__pycache__") || file.ends_with(".pyc") {
            panic!("a committed interpreter cache: {file}");
        }
        let checked = file.starts_with("bench/")
            || file.starts_with("scripts/")
            || file.starts_with("tests/")
            || file.starts_with(".ci/");
        // This file names what it looks for.
        if !checked || file == "tests/it/tidy.rs" {
            continue;
        }
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap_or_default();
        for pattern in ["pkill", "killall"] {
            if text.contains(pattern) {
                by_name.push(format!("{file}: {pattern}"));
            }
        }
    }
    assert!(by_name.is_empty(), "processes ended by name: {by_name:?}");
    let ignored = std::fs::read_to_string(repo_root().join(".gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l.trim() == "__pycache__/"));
}

/// The README and the pages of `docs/` keep every credential out of argv in their examples, and
/// say how to read the metrics without a token (docs/operations.md) and what the Codex gate does
/// not cover (docs/security.md).
#[test]
fn the_docs_keep_tokens_out_of_argv_and_state_the_gates_limits() {
    for page in markdown_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for pattern in ["Bearer $(", "$(cat", "--token ", "admin.token)"] {
            assert!(
                !text.contains(pattern),
                "a command in {} puts a token in argv: `{pattern}`",
                page.display()
            );
        }
    }
    let flat = |page: &str| {
        std::fs::read_to_string(repo_root().join(page))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        flat("docs/operations.md").contains("agentteam status --metrics"),
        "docs/operations.md lacks `agentteam status --metrics`"
    );
    let security = flat("docs/security.md");
    for limit in [
        "covers Codex's native MCP calls only",
        "The Exec credential belongs to the whole runtime process",
        "a delegated thread can still act through `agentteam exec`",
    ] {
        assert!(security.contains(limit), "docs/security.md lacks: {limit}");
    }
}

/// README.md, then every Markdown page of `docs/` in name order.
fn markdown_pages() -> Vec<std::path::PathBuf> {
    let root = repo_root();
    let mut pages: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

/// The lines of a Markdown text outside its fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push(line);
        }
    }
    lines
}

/// The targets of the inline links (`[text](target)`) of a Markdown text, outside code blocks.
fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    for line in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            links.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    links
}

/// The anchors GitHub gives the headings of a Markdown text: lowercase, spaces as hyphens, and
/// nothing else but letters, digits, `-` and `_`.
fn heading_anchors(text: &str) -> Vec<String> {
    prose_lines(text)
        .into_iter()
        .filter(|line| line.starts_with('#'))
        .map(|line| {
            line.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect::<String>()
        })
        .collect()
}

/// The README links every page of `docs/`, and every relative link of the README and of those
/// pages names a file that exists (and, with a `#`, a heading of that file): a page moved or a
/// heading renamed cannot leave a dead link.
#[test]
fn every_docs_page_is_linked_and_every_link_resolves() {
    let root = repo_root();
    let pages = markdown_pages();
    assert!(pages.len() > 1, "docs/ has no page: {pages:?}");
    let readme_links = markdown_links(&std::fs::read_to_string(root.join("README.md")).unwrap());
    let mut broken = Vec::new();
    for page in &pages {
        let name = page.strip_prefix(root).unwrap().display().to_string();
        if name != "README.md"
            && !readme_links
                .iter()
                .any(|link| link.split('#').next() == Some(name.as_str()))
        {
            broken.push(format!("README.md does not link {name}"));
        }
        let text = std::fs::read_to_string(page).unwrap();
        for link in markdown_links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match link.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{name}: `{link}` names no file"));
                continue;
            }
            if let Some(anchor) = anchor {
                let headings = heading_anchors(&std::fs::read_to_string(&target).unwrap());
                if !headings.iter().any(|heading| heading == anchor) {
                    broken.push(format!("{name}: `{link}` names no heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{broken:?}");
}

/// What only the call core does (`daemon::call`), each as the code spells it: validating an
/// input, canonicalizing a target, resolving a selector, and asking an owner.
const CALL_CORE_STEPS: &[&str] = &[
    "validate_input(",
    "validate_tool_input(",
    ".validate(",
    "Target::canonicalize",
    "resolve_selector(",
    "server_client",
    ".forward(",
    "dispatch_daemon(",
    ".search(",
    "output_conforms(",
    "output_violations",
];

#[test]
fn only_the_call_core_validates_canonicalizes_checks_selectors_and_routes() {
    let src = repo_root().join("src/daemon");
    let mut routes = vec![src.join("exec.rs")];
    rust_files(&src.join("mcp"), &mut routes);
    for file in &routes {
        let code = code_of(file);
        for step in CALL_CORE_STEPS {
            assert!(
                !code.contains(step),
                "{} does `{step}` itself: a route hands the call to `daemon::call`",
                file.display()
            );
        }
    }
    // The check is real: the core does every step, and both routes hand it their calls.
    let mut core = Vec::new();
    rust_files(&src.join("call"), &mut core);
    let core: String = core.iter().map(|f| code_of(f)).collect();
    for step in CALL_CORE_STEPS {
        assert!(core.contains(step), "the call core no longer does `{step}`");
    }
    for route in ["exec.rs", "mcp/tools.rs"] {
        assert!(code_of(&src.join(route)).contains("call::run("), "{route}");
    }
}

/// The longest a hand-written source file may be.
const MAX_FILE_LINES: usize = 800;

/// Files allowed past [`MAX_FILE_LINES`], each with why: one homogeneous registry each, which a
/// split would scatter without making any part easier to read.
const LONG_FILES: &[(&str, &str)] = &[
    (
        "src/server/store/migrations.rs",
        "the schema's migrations in order, one SQL text per version and backend",
    ),
    (
        "src/contract/shape.rs",
        "the schema-shape checker: one compiler and one reader of the same node types",
    ),
];

#[test]
fn no_source_file_is_over_800_lines_but_the_named_registries() {
    let mut files = Vec::new();
    rust_files(&repo_root().join("src"), &mut files);
    let mut long = Vec::new();
    for file in &files {
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        let name = file
            .strip_prefix(repo_root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let allowed = LONG_FILES.iter().any(|(path, _)| *path == name);
        if lines > MAX_FILE_LINES && !allowed {
            long.push(format!("{name}: {lines} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "split these by concern (or name a homogeneous registry in LONG_FILES, with why):\n{}",
        long.join("\n")
    );
    for (path, why) in LONG_FILES {
        let lines = std::fs::read_to_string(repo_root().join(path))
            .unwrap_or_else(|_| panic!("{path} is named in LONG_FILES but gone"))
            .lines()
            .count();
        assert!(
            lines > MAX_FILE_LINES,
            "{path} is {lines} lines now: take it out of LONG_FILES ({why})"
        );
    }
}

#[test]
fn the_contract_knows_nothing_of_http() {
    let modules = src_modules();
    let known: std::collections::BTreeSet<String> =
        modules.iter().map(|m| m.path.clone()).collect();
    for module in modules
        .iter()
        .filter(|m| m.path.starts_with("crate::contract"))
    {
        let imported = imports(module, &known);
        let http: Vec<_> = imported
            .iter()
            .filter(|i| {
                i.starts_with("crate::wire")
                    || i.starts_with("crate::daemon")
                    || i.starts_with("crate::server")
                    || i.starts_with("crate::client")
                    || i.starts_with("crate::cli")
            })
            .collect();
        assert!(http.is_empty(), "{} imports {http:?}", module.path);
        let code = code_of(&module.file);
        for word in ["axum", "hyper", "reqwest"] {
            assert!(
                !code.contains(&format!("{word}::")),
                "{} uses {word}",
                module.path
            );
        }
    }
}

/// Every OS-specific call is made in `src/platform/`: no other file of `src/` (its tests
/// included) names a Unix-only API or reads `/proc`, so what the crate asks of Linux is one
/// module's list. Comments may say what the seam does; code may not go around it.
#[test]
fn unix_only_calls_live_in_the_platform_seam() {
    const UNIX_ONLY: [&str; 5] = [
        "std::os::unix",
        "rustix::",
        "tokio::signal::unix",
        "libc::",
        "/proc/",
    ];
    /// `text` without its comments (`//` to the end of the line, `/* */` nested): strings, byte
    /// strings and raw strings are code and kept whole, a `//` inside one included.
    fn without_comments(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let mut code = String::with_capacity(text.len());
        let mut i = 0;
        while i < chars.len() {
            let (c, next) = (chars[i], chars.get(i + 1).copied());
            if c == '/' && next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && next == Some('*') {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            } else if c == 'r'
                && matches!(next, Some('"' | '#'))
                && (i == 0
                    || !ident(chars[i - 1])
                    || (chars[i - 1] == 'b' && (i == 1 || !ident(chars[i - 2]))))
            {
                // A raw string: `r"…"` or `r#"…"#`, ended by its quote and as many `#`.
                let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
                if chars.get(i + 1 + hashes) != Some(&'"') {
                    code.push(c);
                    i += 1;
                    continue;
                }
                let start = i;
                i += 2 + hashes;
                let closes = |at: usize| {
                    chars[at] == '"'
                        && chars[at + 1..].iter().take_while(|&&h| h == '#').count() >= hashes
                };
                while i < chars.len() && !closes(i) {
                    i += 1;
                }
                i = (i + 1 + hashes).min(chars.len());
                code.extend(&chars[start..i]);
            } else if c == '"' {
                let start = i;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i = (i + 1).min(chars.len());
                code.extend(&chars[start..i]);
            } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
                // A character literal (`'"'`, `'\''`), not a lifetime: kept, and its quote is
                // not a string's.
                let start = i;
                i += if next == Some('\\') { 3 } else { 1 };
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i = (i + 1).min(chars.len());
                code.extend(&chars[start..i]);
            } else {
                code.push(c);
                i += 1;
            }
        }
        code
    }
    let root = repo_root();
    let seam = root.join("src/platform");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut outside = Vec::new();
    let mut seam_code = String::new();
    for file in &files {
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        if file.starts_with(&seam) {
            seam_code.push_str(&code);
            continue;
        }
        let name = file.strip_prefix(root).unwrap().display().to_string();
        for call in UNIX_ONLY.iter().filter(|call| code.contains(**call)) {
            outside.push(format!("{name}: `{call}`"));
        }
    }
    assert!(
        outside.is_empty(),
        "OS-specific calls outside src/platform/ (give the seam a function for them):\n{}",
        outside.join("\n")
    );
    // The check is real: the seam makes the calls the rest of `src/` may not (`libc` is no
    // dependency of the crate, so the seam reaches the kernel through `rustix`, and a `libc::`
    // call is shown to be seen instead), and a comment is not code.
    for call in UNIX_ONLY.iter().filter(|call| **call != "libc::") {
        assert!(
            seam_code.contains(call),
            "src/platform/ makes no `{call}` call"
        );
    }
    let sample =
        "let pid = unsafe { libc::getpid() }; // not /proc/self\n/* rustix:: */ \"a // b\"";
    let code = without_comments(sample);
    assert!(
        code.contains("libc::") && code.contains("\"a // b\""),
        "{code}"
    );
    assert!(
        !code.contains("/proc/") && !code.contains("rustix::"),
        "{code}"
    );
    assert!(without_comments("r#\"/proc/\"# // x").contains("/proc/"));
    assert!(!without_comments("let q = '\\''; // /proc/").contains("/proc/"));
}

/// The daemon makes its clock and its metrics registry once, at start (`daemon/app.rs`), and
/// every other part takes them from the state: no second clock, no global registry.
#[test]
fn the_daemons_clock_and_metrics_are_made_once_and_travel_in_its_state() {
    let src = repo_root().join("src/daemon");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let metrics = std::fs::read_to_string(src.join("metrics.rs")).unwrap();
    for global in ["OnceLock", "LazyLock", "static REGISTRY", "fn global"] {
        assert!(
            !metrics.contains(global),
            "metrics.rs: `{global}`: a global registry"
        );
    }
    // `metrics.rs` defines the registry (its `Default` is `new`); the rest only take it.
    for file in files.iter().filter(|f| !f.ends_with("daemon/metrics.rs")) {
        let code = code_of(file);
        let at_start = file.ends_with("daemon/app.rs");
        for made in ["Clock::default()", "Metrics::new()"] {
            assert_eq!(
                code.contains(made),
                at_start,
                "{}: `{made}` {}",
                file.display(),
                if at_start {
                    "is where the daemon makes it"
                } else {
                    "outside the daemon's start: take it from the state"
                }
            );
        }
    }
}

/// A test whose precondition is missing fails under `CI` and says so loudly elsewhere: every skip
/// goes through `support::missing_precondition`, and no test prints its own skip line or returns
/// early on its own.
#[test]
fn every_skip_fails_in_ci() {
    let mut files = Vec::new();
    collect_files(&repo_root().join("tests"), &mut files);
    let needle = ["SKIP", "PING"].concat();
    let offenders: Vec<String> = files
        .iter()
        .filter(|file| {
            file.extension().is_some_and(|e| e == "rs") && !file.ends_with("tests/it/support.rs")
        })
        .filter(|file| std::fs::read_to_string(file).is_ok_and(|text| text.contains(&needle)))
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these print their own skip line instead of `support::missing_precondition`: {offenders:?}"
    );
    let support = std::fs::read_to_string(repo_root().join("tests/it/support.rs")).unwrap();
    let helper = support
        .split("pub fn missing_precondition(")
        .nth(1)
        .expect("support has `missing_precondition`");
    assert!(
        helper
            .split("\n}\n")
            .next()
            .unwrap()
            .contains("var_os(\"CI\").is_none()"),
        "`missing_precondition` fails under CI"
    );
}

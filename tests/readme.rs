//! The README's examples run as written.
//!
//! Every fenced block of `README.md` whose first line starts with
//! `$ agenra ` is a transcript: each `$ agenra ARGS` line is run against
//! the built binary from the repository root (ARGS split on spaces: the
//! README keeps its examples free of shell quoting), and the lines that
//! follow it, up to the next `$` line, must be exactly what it printed on
//! stdout. The README must stay short (at most 200 lines).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One `$ agenra …` line and the output the README shows for it.
#[derive(Debug)]
struct Example {
    line: usize,
    args: Vec<String>,
    expected: String,
}

/// The transcripts in `text` (see the module doc).
fn examples(text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut transcript = false;
    for (index, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            transcript = false;
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ agenra ") {
            transcript = true;
            out.push(Example {
                line: index + 1,
                args: command.split(' ').map(str::to_owned).collect(),
                expected: String::new(),
            });
        } else if line.starts_with('$') {
            transcript = false;
        } else if transcript {
            if let Some(example) = out.last_mut() {
                example.expected.push_str(line);
                example.expected.push('\n');
            }
        }
    }
    out
}

fn run(example: &Example, dir: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(&example.args)
        .current_dir(dir)
        .output()
        .expect("run agenra");
    assert!(
        output.status.success(),
        "README.md:{}: `agenra {}` failed: {}",
        example.line,
        example.args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn the_readme_examples_run_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let examples = examples(&readme);
    assert!(
        examples.len() >= 2,
        "README.md: expected the replay and check transcripts, found {examples:?}"
    );
    for example in &examples {
        let printed = run(example, &root());
        assert_eq!(
            printed,
            example.expected,
            "README.md:{}: `agenra {}` prints something else than the README shows",
            example.line,
            example.args.join(" ")
        );
    }
}

#[test]
fn the_readme_is_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines; keep it to 200");
}

#[test]
fn the_first_command_replays_an_example_that_exists() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let first = readme
        .lines()
        .find(|line| line.contains("cargo install"))
        .expect("an install command");
    let replay = first
        .split("&& ")
        .find(|part| part.starts_with("agenra "))
        .expect("the install line runs agenra");
    let example = Example {
        line: 4,
        args: replay
            .trim()
            .trim_start_matches("agenra ")
            .split(' ')
            .map(str::to_owned)
            .collect(),
        expected: String::new(),
    };
    assert!(run(&example, &root()).contains("DENY"));
}

#[test]
fn transcripts_are_read_from_fenced_blocks_only() {
    let text = "$ agenra outside\n```\n$ agenra check a\nok\n$ other\nno\n```\n```sh\nx\n```\n";
    let found = examples(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].args, ["check", "a"]);
    assert_eq!(found[0].expected, "ok\n");
    assert_eq!(found[0].line, 3);
}

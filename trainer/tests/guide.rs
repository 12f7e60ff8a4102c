//! docs/guide.md shows commands a user copies: every `vnni-dispatch` line of its fenced `sh`
//! blocks must parse with the CLI (subcommand and flags; `--help` is appended so nothing runs).

mod common;
use common::vnni;

/// The `vnni-dispatch` command lines of the fenced `sh` blocks of `markdown`.
fn fenced_commands(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in markdown.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if in_sh && t.starts_with("vnni-dispatch ") {
            out.push(t.to_string());
        }
    }
    out
}

#[test]
fn every_command_of_the_guide_parses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let guide = std::fs::read_to_string(root.join("docs/guide.md")).unwrap();
    let commands = fenced_commands(&guide);
    assert!(commands.len() >= 12, "the guide shows {} commands", commands.len());
    for command in &commands {
        let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
        assert!(!args.iter().any(|a| a.contains(['"', '\'', '$', '|'])), "keep guide commands literal: {command}");
        // `--version` prints and exits like `--help`; everything else gets `--help` appended.
        if args != ["--version"] {
            args.push("--help");
        }
        let (ok, stdout, stderr) = vnni(&args);
        assert!(ok && !stdout.is_empty(), "the CLI does not accept `{command}`:\n{stderr}");
    }
}

#[test]
fn the_command_extraction_sees_only_sh_blocks() {
    let md = "```sh\nvnni-dispatch fit --corpus C\n```\n```text\nvnni-dispatch nosuch\n```\nvnni-dispatch prose\n";
    assert_eq!(fenced_commands(md), vec!["vnni-dispatch fit --corpus C".to_string()]);
}

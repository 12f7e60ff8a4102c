//! The CLI as documented: every `vnni-dispatch` line of the fenced `sh` blocks of docs/guide.md
//! parses (subcommand and flags; `--help` is appended so nothing runs), and the man pages and
//! shell completions cover every subcommand.

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

/// The subcommands `vnni-dispatch --help` lists.
fn subcommands() -> Vec<String> {
    let (ok, stdout, _) = vnni(&["--help"]);
    assert!(ok);
    let listed = stdout.split("Commands:").nth(1).unwrap().split("Options:").next().unwrap().to_string();
    listed.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| *w != "help").map(String::from).collect()
}

#[test]
fn man_pages_and_completions_cover_every_subcommand() {
    let subs = subcommands();
    assert!(subs.len() >= 17 && subs.contains(&"refresh".to_string()), "{subs:?}");
    let dir = std::env::temp_dir().join(format!("vnni-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ok, _, stderr) = vnni(&["man", "--out", dir.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    for page in std::iter::once("vnni-dispatch".to_string()).chain(subs.iter().map(|s| format!("vnni-dispatch-{s}"))) {
        let roff = std::fs::read_to_string(dir.join(format!("{page}.1"))).unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(roff.contains(".TH") && roff.contains(".SH NAME"), "{page}.1 is not a man page");
    }
    // Each shell's own token for "this subcommand" (a bare name would match inside other words).
    let token = |shell: &str, s: &str| match shell {
        "bash" => format!("vnni__dispatch,{s})"),
        "fish" => format!("-a \"{s}\""),
        _ => format!("({s})"),
    };
    for shell in ["bash", "zsh", "fish"] {
        let (ok, script, stderr) = vnni(&["completions", shell]);
        assert!(ok, "{stderr}");
        for s in &subs {
            assert!(script.contains(&token(shell, s)), "the {shell} completions do not know `{s}`");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

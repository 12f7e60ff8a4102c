//! Progress for long steps: a bar on a terminal, plain log lines otherwise (CI logs, pipes,
//! `refresh`'s captured output), so nothing is lost either way.

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// `len` steps of `what`; hidden unless stderr is a terminal.
    pub fn new(len: u64, what: &str) -> Progress {
        let bar = ProgressBar::new(len);
        if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed} (eta {eta}) {msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(what.to_string());
        Progress { bar }
    }

    /// One step done; `line` goes above the bar, or to stderr when there is no bar.
    pub fn step(&self, line: String) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
        self.bar.inc(1);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

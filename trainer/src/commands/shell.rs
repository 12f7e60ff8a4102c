//! `vnni-dispatch completions SHELL` and `vnni-dispatch man --out DIR`: shell completions and
//! man pages generated from the clap definitions, so they can never disagree with the CLI.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: Shell,
}

impl ToArgv for CompletionsArgs {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("completions").pos(self.shell).done()
    }
}

/// Print the completion script of `a.shell` to stdout (a closed pipe, as in `| head`, is
/// not an error).
pub fn completions(a: &CompletionsArgs) -> Result<()> {
    let mut cmd = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "vnni-dispatch", &mut script);
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing the completion script"),
        _ => Ok(()),
    }
}

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ManArgs {
    /// Directory for vnni-dispatch.1 and one vnni-dispatch-SUBCOMMAND.1 per subcommand.
    #[arg(long)]
    pub out: PathBuf,
}

impl ToArgv for ManArgs {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("man").path("out", &self.out).done()
    }
}

/// Write the man pages (roff) of the command and of every subcommand into `a.out`.
pub fn man(a: &ManArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let cmd = crate::Cli::command();
    let mut pages = vec![("vnni-dispatch".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands() {
        let name = format!("vnni-dispatch-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, page) in pages {
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff).with_context(|| format!("rendering {name}.1"))?;
        let path = a.out.join(format!("{name}.1"));
        vnni_corpus::write_bytes(&path, &roff).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("man pages in {}", a.out.display());
    Ok(())
}

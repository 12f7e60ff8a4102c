//! `vnni-dispatch report --corpus DIR [--policy policy.json] --out DIR`: the corpus report
//! (Markdown, PNG and SVG charts): decode bandwidth vs the measured copy roofline, regret CDFs of the
//! policy and the baselines per domain group, decision maps.

use std::path::PathBuf;

use anyhow::{Context, Result};
use vnni_learner::corpus_report::write_corpus_report;
use vnni_policy::Policy;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// A sealed corpus directory (authenticated before anything is read).
    #[arg(long)]
    pub corpus: PathBuf,
    /// A fitted policy: its in-sample regret is plotted and its decision maps drawn
    /// (without it, the maps are of the policy the learner fits from this corpus).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Where report.md and the charts (PNG and SVG) go (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("report")
            .path("corpus", &self.corpus)
            .opt_path("policy", self.policy.as_deref())
            .path("out", &self.out)
            .done()
    }
}

pub fn run(a: &Args) -> Result<()> {
    let policy = match &a.policy {
        Some(path) => {
            let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let policy = Policy::from_bytes(&bytes)
                .with_context(|| format!("{} is not a policy (vnni-policy-v2 JSON)", path.display()))?;
            // Its codebook and mode words name the report's files: only the vocabulary passes.
            policy.check().with_context(|| format!("{}: not a valid policy", path.display()))?;
            Some(policy)
        }
        None => None,
    };
    let files = write_corpus_report(&a.corpus, policy.as_ref(), &a.out)?;
    let count = |ext: &str| files.iter().filter(|f| f.extension().is_some_and(|e| e == ext)).count();
    println!("report {} ({} charts, PNG and SVG each)", a.out.join("report.md").display(), count("png"));
    debug_assert_eq!(count("png"), count("svg"));
    Ok(())
}

//! `vnni-dispatch merge --out DIR SHARD...`: authenticate shard work directories (identical
//! collection plans, hence the same plan digest, registry digest and build identity, and
//! this checkout's registry), combine their published cells, and seal the corpus when the
//! plan is complete.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{plan_difference, CellStore, CollectionPlan};
use vnni_kernels::registry::registry_digest_for;

use vnni_measure::collect::finish;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// The combined work directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Shard work directories (each holds plan.json and cells/).
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        self.shards.iter().fold(Argv::new("merge").path("out", &self.out), |a, s| a.pos(s.display())).done()
    }
}

pub fn run(args: &Args) -> Result<()> {
    let first = CellStore::new(&args.shards[0]);
    let plan_bytes =
        std::fs::read(first.plan_path()).with_context(|| format!("reading {}", first.plan_path().display()))?;
    let plan = CollectionPlan::read(&first.plan_path())?;
    if plan.registry_digest != registry_digest_for(&plan.inventory.m) {
        bail!(
            "{}: collected with another candidate registry ({}); this checkout has {}",
            first.plan_path().display(),
            plan.registry_digest,
            registry_digest_for(&plan.inventory.m)
        );
    }
    for dir in &args.shards[1..] {
        let p = CellStore::new(dir).plan_path();
        let bytes = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
        if bytes != plan_bytes {
            bail!(
                "{}: not a shard of the same collection as {} ({})",
                p.display(),
                args.shards[0].display(),
                plan_difference(&plan_bytes, &bytes)
            );
        }
    }
    let out = CellStore::new(&args.out);
    out.bind_plan(&plan)?;
    let (mut copied, mut same) = (0, 0);
    for dir in &args.shards {
        let shard = CellStore::new(dir);
        for key in plan.cells().iter().filter(|k| shard.is_published(k)) {
            // The validating readers: a torn or edited cell stops the merge here.
            shard.read_cell(key)?;
            let read = |p: PathBuf| std::fs::read(&p).with_context(|| format!("reading {}", p.display()));
            let rows = read(shard.rows_path(key))?;
            if out.is_published(key) {
                if read(out.rows_path(key))? != rows {
                    bail!("cell {} differs between {} and another shard", key.stem(), dir.display());
                }
                same += 1;
                continue;
            }
            for path in [shard.samples_path(key), shard.provenance_path(key)] {
                let target = args.out.join("cells").join(path.file_name().expect("a file"));
                vnni_corpus::write_bytes(&target, &read(path.clone())?)?;
            }
            // Aggregate rows last: the cell's commit point.
            vnni_corpus::write_bytes(&out.rows_path(key), &rows)?;
            copied += 1;
        }
        let res = dir.join("resources.csv");
        if res.is_file() && !args.out.join("resources.csv").is_file() {
            vnni_corpus::write_bytes(
                &args.out.join("resources.csv"),
                &std::fs::read(&res).with_context(|| format!("reading {}", res.display()))?,
            )?;
        }
    }
    println!(
        "merge: {} shards, {copied} cells copied, {same} identical duplicates -> {}",
        args.shards.len(),
        args.out.display()
    );
    finish(&out, &plan)?;
    Ok(())
}

//! `vnni-dispatch inventory`: the resolved plan of a profile and its digest, or
//! `inventory import model.gguf` to add a model's projection shapes.

use std::path::PathBuf;

use anyhow::{bail, Result};
use vnni_corpus::inventory::{import_toml, Inventory};
use vnni_measure::protocol::SETTLE;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// The inventory directory (`--dir` is the old spelling).
    #[arg(long = "inventory", visible_alias = "dir", default_value = "corpus/inventory", global = true)]
    pub dir: PathBuf,
    #[arg(long, default_value = "core")]
    pub profile: String,
    /// Print the plan as canonical JSON (the digest's input).
    #[arg(long)]
    pub json: bool,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        let mut a =
            Argv::new("inventory").path("inventory", &self.dir).val("profile", &self.profile).flag("json", self.json);
        if let Some(Action::Import { model, family }) = &self.action {
            a = a.pos("import").pos(model.display()).opt("family", family.as_ref());
        }
        a.done()
    }
}

#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Action {
    /// Add a GGUF model's 2-D weight shapes (and formats) as `imported-<family>.toml`.
    Import {
        model: PathBuf,
        /// Family name (default: the file's general.name, else its file stem).
        #[arg(long)]
        family: Option<String>,
    },
}

pub fn run(args: &Args) -> Result<()> {
    if let Some(Action::Import { model, family }) = &args.action {
        return import(args, model, family.as_deref());
    }
    let inv = Inventory::load(&args.dir)?;
    let plan = inv.resolve(&args.profile)?;
    if args.json {
        println!("{}", plan.canonical_json());
        return Ok(());
    }
    println!("{:<14} {:<12} {:<7} formats / names", "shape", "partition", "overlay");
    for s in &plan.shapes {
        let formats: Vec<&str> = s.formats.iter().map(|f| f.name()).collect();
        println!(
            "{:<14} {:<12} {:<7} {} / {}",
            format!("{}x{}", s.n, s.k),
            format!("{:?}", s.partition).to_lowercase(),
            if s.exact_overlay { "yes" } else { "no" },
            formats.join(","),
            s.names.join(",")
        );
    }
    println!(
        "\nprofile {}: {} geometries, M {:?}, modes {:?}, {} cells, {} pass(es) of {} warmup + {} sample rounds \
         (a pass ends after {} once every candidate still running is within {}%); inventory digest {}",
        plan.profile,
        plan.shapes.len(),
        plan.m,
        plan.modes,
        plan.cell_count(),
        plan.passes,
        plan.warmups,
        plan.samples,
        SETTLE.after,
        SETTLE.spread * 100.0,
        plan.digest()
    );
    Ok(())
}

fn import(args: &Args, model: &std::path::Path, family: Option<&str>) -> Result<()> {
    let gguf = vnni_corpus::gguf::read(model)?;
    let family = match family {
        Some(f) => f.to_string(),
        None => gguf
            .name
            .clone()
            .unwrap_or_else(|| model.file_stem().map_or("model".into(), |s| s.to_string_lossy().into_owned())),
    };
    let imported = import_toml(&gguf, &family, &model.display().to_string())
        .map_err(|e| anyhow::anyhow!("{}: {e}", model.display()))?;
    for (type_name, tensors) in &imported.skipped {
        eprintln!(
            "warning: {}: {} tensor(s) of type {type_name}, not supported yet, skipped: {}",
            model.display(),
            tensors.len(),
            tensors.join(", ")
        );
    }
    let (text, count) = (imported.toml, imported.shapes);
    let safe: String = family
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let out = args.dir.join(format!("imported-{safe}.toml"));
    if out.exists() {
        bail!("{} exists; delete it first to re-import", out.display());
    }
    vnni_corpus::write_bytes(&out, text.as_bytes())?;
    // The whole inventory must still load (unique names, partitions disjoint).
    if let Err(e) = Inventory::load(&args.dir) {
        let _ = std::fs::remove_file(&out);
        bail!("importing {} would break the inventory: {e}", model.display());
    }
    println!("{count} shapes from {} ({} tensors) -> {}", model.display(), gguf.tensors.len(), out.display());
    Ok(())
}

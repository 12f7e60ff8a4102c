//! `vnni-dispatch formats`: the format registry as a table or JSON.

use serde::Serialize;
use vnni_kernels::contract::ScaleRule;
use vnni_kernels::{Codebook, SourceFormat};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("formats").flag("json", self.json).done()
    }
}

#[derive(Serialize)]
struct FormatRow {
    name: &'static str,
    ggml_type: u32,
    codebook: Codebook,
    block_bytes: usize,
    block_elems: usize,
    bits_per_weight: f64,
    /// The codebook's name when several source formats share it.
    alias_group: Option<Codebook>,
}

#[derive(Serialize)]
struct CodebookRow {
    name: Codebook,
    payload_bytes: usize,
    scale_rule: &'static str,
    has_second_plane: bool,
    source_formats: Vec<&'static str>,
}

#[derive(Serialize)]
struct AliasGroup {
    codebook: Codebook,
    formats: Vec<&'static str>,
}

#[derive(Serialize)]
struct Registry {
    formats: Vec<FormatRow>,
    codebooks: Vec<CodebookRow>,
    alias_groups: Vec<AliasGroup>,
}

fn names(formats: &[SourceFormat]) -> Vec<&'static str> {
    formats.iter().map(|f| f.name()).collect()
}

fn registry() -> Registry {
    let alias_groups: Vec<AliasGroup> = Codebook::ALL
        .into_iter()
        .map(|c| AliasGroup { codebook: c, formats: names(&SourceFormat::aliases_of(c)) })
        .filter(|g| g.formats.len() > 1)
        .collect();
    let formats = SourceFormat::ALL
        .into_iter()
        .map(|f| FormatRow {
            name: f.name(),
            ggml_type: f.info().ggml_type,
            codebook: f.codebook(),
            block_bytes: f.block_bytes(),
            block_elems: f.block_elems(),
            bits_per_weight: f.bits_per_weight(),
            alias_group: alias_groups.iter().any(|g| g.codebook == f.codebook()).then_some(f.codebook()),
        })
        .collect();
    let codebooks = Codebook::ALL
        .into_iter()
        .map(|c| CodebookRow {
            name: c,
            payload_bytes: c.payload_bytes(),
            scale_rule: match c.scale_rule() {
                ScaleRule::Single => "single",
                ScaleRule::Asymmetric => "asymmetric",
                ScaleRule::DualScale => "dual-scale",
            },
            has_second_plane: c.has_second(),
            source_formats: names(&SourceFormat::aliases_of(c)),
        })
        .collect();
    Registry { formats, codebooks, alias_groups }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let reg = registry();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reg)?);
        return Ok(());
    }
    println!(
        "{:<8} {:<9} {:>11} {:>13} {:>12}  alias group",
        "format", "codebook", "block bytes", "elems/block", "bits/weight"
    );
    for f in &reg.formats {
        let group = match f.alias_group {
            Some(c) => format!("{c}: {}", names(&SourceFormat::aliases_of(c)).join(", ")),
            None => "-".to_string(),
        };
        println!(
            "{:<8} {:<9} {:>11} {:>13} {:>12.4}  {group}",
            f.name,
            f.codebook.name(),
            f.block_bytes,
            f.block_elems,
            f.bits_per_weight
        );
    }
    println!(
        "\n{} source formats, {} codebooks, {} alias groups",
        reg.formats.len(),
        reg.codebooks.len(),
        reg.alias_groups.len()
    );
    Ok(())
}

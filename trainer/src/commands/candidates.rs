//! `vnni-dispatch candidates`: the candidate registry.

use serde::Serialize;
use vnni_kernels::registry::{
    all_candidates, is_current, prefill_registry_digest, registry_digest, Candidate, KbRule, GENERATION,
};
use vnni_kernels::{Backend, Surface};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// Only this surface.
    #[arg(long)]
    pub surface: Option<Surface>,
    /// Only this backend.
    #[arg(long)]
    pub backend: Option<Backend>,
    #[arg(long)]
    pub json: bool,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("candidates").opt("surface", self.surface).opt("backend", self.backend).flag("json", self.json).done()
    }
}

#[derive(Serialize)]
struct Listing {
    /// The decode and grouped candidates (what decode/grouped corpora and policies bind).
    registry_digest: String,
    /// The prefill candidates (bound too by corpora with prefill rows).
    prefill_registry_digest: String,
    candidates: Vec<Entry>,
}

#[derive(Serialize)]
struct Entry {
    #[serde(flatten)]
    candidate: Candidate,
    generic_legal: bool,
    bpp_rule: String,
}

fn bpp_rule(c: &Candidate) -> String {
    match c.kb {
        KbRule::Wide => "bpp = KBLK".into(),
        KbRule::Literal(kb) => format!("KB = {kb} (overlay only; illegal if KB > KBLK); bpp = ceil(KBLK / KB)"),
        KbRule::Capped(kb) => format!("KB = min({kb}, KBLK); bpp = ceil(KBLK / KB)"),
        KbRule::Waves(w) => {
            format!("KB = clamp(ceil({w} * units / ceil(N / {})), 1, KBLK); bpp = ceil(KBLK / KB) (units: SMs or CPU threads)", c.tile)
        }
        KbRule::Inherited => "inherited from the M = 1 candidate".into(),
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    // The current generation: what a sweep times (retired candidates only resolve old corpora).
    let cands: Vec<Candidate> = all_candidates()
        .iter()
        .filter(|c| is_current(&c.id))
        .filter(|c| args.surface.is_none_or(|s| s == c.surface))
        .filter(|c| args.backend.is_none_or(|b| b == c.backend))
        .cloned()
        .collect();
    if args.json {
        let listing = Listing {
            registry_digest: registry_digest(),
            prefill_registry_digest: prefill_registry_digest(),
            candidates: cands
                .into_iter()
                .map(|c| Entry { generic_legal: c.generic_legal(), bpp_rule: bpp_rule(&c), candidate: c })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&listing)?);
        return Ok(());
    }
    println!(
        "{:<36} {:<7} {:<7} {:<10} {:>5} {:>4}  {:<8} bpp",
        "id", "backend", "surface", "family", "tile", "cpt", "generic"
    );
    for c in &cands {
        println!(
            "{:<36} {:<7} {:<7} {:<10} {:>5} {:>4}  {:<8} {}",
            c.id,
            c.backend.name(),
            c.surface.name(),
            format!("{:?}", c.family).to_lowercase(),
            c.tile,
            c.cpt,
            if c.generic_legal() { "yes" } else { "overlay" },
            bpp_rule(c)
        );
    }
    println!(
        "\n{} candidates of registry generation {GENERATION}; registry digest {} (decode, grouped), {} (prefill)",
        cands.len(),
        registry_digest(),
        prefill_registry_digest()
    );
    Ok(())
}

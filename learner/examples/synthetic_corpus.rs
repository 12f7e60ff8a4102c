//! Write a sealed synthetic CUDA corpus the size of a production M = 1 sweep, to time `fit` on
//! (issue 16: under 60 s on 2 cores for 5,000 cells; `scripts/perf/fit_time.sh` runs it):
//! every source format, both modes, N 256 .. 131072 and K 256 .. 32768 in half octaves, the
//! 49 CUDA decode candidates with preflight resources (so every decode domain fits cost
//! models and distils trees), two timing passes, shapes dealt into 16 model families (so the
//! leave-one-family-out refits run), every fifth geometry sealed.
//!
//!     cargo run --release -p vnni-learner --example synthetic_corpus -- OUT [SEED]

use vnni_kernels::{Mode, SourceFormat};
use vnni_learner::synthetic::{write, Spec};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: synthetic_corpus OUT [SEED]")?;
    let seed = args.next().map_or(Ok(16), |s| s.parse::<u64>().map_err(|e| format!("SEED {s}: {e}")))?;
    let spec = Spec {
        formats: SourceFormat::ALL.to_vec(),
        ms: vec![1],
        modes: vec![Mode::Eager, Mode::Graph],
        passes: 2,
        families: 16,
        registers: Some(64),
        overlay: Vec::new(),
        ..Spec::cuda(seed)
    };
    let manifest = write(std::path::Path::new(&out), &spec)?;
    let cells: usize = spec
        .ns
        .iter()
        .flat_map(|_| spec.ks.iter())
        .map(|&k| spec.formats.iter().filter(|f| k % f.block_elems() == 0).count() * spec.modes.len())
        .sum();
    println!("{out}: corpus {} with {cells} cells at M = 1", manifest.corpus_id);
    Ok(())
}

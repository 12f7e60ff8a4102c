//! Write a sealed synthetic CUDA corpus the size of a production M = 1 sweep, to time `fit` on
//! (issue 16: under 60 s on 2 cores for 5,000 cells; `scripts/perf/fit_time.sh` runs it):
//! every source format (a cell is a format and a shape, timed in both modes), N 256 .. 330,000
//! on thirds of an octave (multiples of 128) and K 256 .. 65536 in half octaves, the CUDA
//! decode candidates with preflight resources (so every decode domain fits cost models and
//! distils trees), two timing passes, shapes dealt into 16 model families (so the
//! leave-one-family-out refits run), every fifth geometry sealed.
//!
//!     cargo run --release -p vnni-learner --example synthetic_corpus -- OUT [SEED]

use vnni_kernels::{Mode, SourceFormat};
use vnni_learner::synthetic::{half_octaves, write, Spec};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: synthetic_corpus OUT [SEED]")?;
    let seed = args.next().map_or(Ok(16), |s| s.parse::<u64>().map_err(|e| format!("SEED {s}: {e}")))?;
    // 256 * 2^(i/3), rounded to a multiple of 128 (the first octave's thirds meet at 384).
    let mut ns: Vec<usize> =
        (0..=31).map(|i| ((256.0 * 2f64.powf(f64::from(i) / 3.0) / 128.0).round() as usize) * 128).collect();
    ns.dedup();
    let spec = Spec {
        ns,
        ks: half_octaves(256, 65536),
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
    println!("{out}: corpus {} with {} cells at M = 1 (format x shape, both modes)", manifest.corpus_id, spec.cells());
    Ok(())
}

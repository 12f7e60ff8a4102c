//! Fixture generation throughput (a benchmark, not a test): `cargo bench -p vnni-kernels --bench fixtures`.
//! Prints one CSV row per (codebook, shape): bytes generated, seconds (best of 3), GB/s.

use std::time::Instant;

use vnni_kernels::{fixture, Codebook};

fn main() {
    let shapes = [(248_320usize, 5_120usize), (151_936, 4_096), (4_096, 12_288)];
    println!("codebook,n,k,bytes,seconds,gbps,threads");
    for (n, k) in shapes {
        for cb in Codebook::ALL {
            let mut best = f64::INFINITY;
            let mut bytes = 0;
            for rep in 0..3 {
                let t = Instant::now();
                let w = fixture::packed_matrix(cb, n, k, rep).expect("fixture");
                best = best.min(t.elapsed().as_secs_f64());
                bytes = w.bytes();
                std::hint::black_box(&w);
            }
            println!(
                "{cb},{n},{k},{bytes},{best:.4},{:.2},{}",
                bytes as f64 / best / 1e9,
                rayon::current_num_threads()
            );
        }
    }
}

//! Reads queries "codebook mode M N K" from stdin (# starts a comment) and prints the kernel the
//! generated Rust tables pick for each: the same lines as the C++ example for the same tables.
//! Build: put the generated `vnni_dispatch.rs` beside this file and run `rustc main.rs`
//! (or, in a crate, `#[path = "vnni_dispatch.rs"] mod vnni_dispatch;` anywhere in it).

#[path = "vnni_dispatch.rs"]
mod vnni_dispatch;

use std::io::BufRead;

use vnni_dispatch::{Status, Via};

/// What a caller does when the tables refuse a query.
fn refusal(status: Status) -> &'static str {
    match status {
        Status::BadShape => {
            "bad shape (M, N or K zero or >= 2^31, or K not a multiple of 32): not a quantized matmul these kernels run"
        }
        Status::UnknownCodebook => {
            "unknown codebook: the tables were not built for this weight format; fall back to the reference kernel"
        }
        Status::UnknownMode => "unknown mode: use one the policy was timed in (its `modes`, e.g. graph)",
        _ => "no selection: a validated table never answers this; report it",
    }
}

fn main() {
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let parsed = match f.as_slice() {
            [codebook, mode, m, n, k] => {
                m.parse().ok().zip(n.parse().ok()).zip(k.parse().ok()).map(|((m, n), k)| (*codebook, *mode, m, n, k))
            }
            _ => None,
        };
        let Some((codebook, mode, m, n, k)) = parsed else {
            eprintln!("not a query: {line}");
            std::process::exit(2);
        };
        // One entry point per surface; `select` would route by M just the same.
        let s = match m {
            1 => vnni_dispatch::select_decode(codebook, mode, n, k),
            m if m < 32 => vnni_dispatch::select_grouped(codebook, mode, m, n, k),
            _ => vnni_dispatch::select_prefill(codebook, mode, m, n, k),
        };
        print!("{codebook} {mode} M={m} N={n} K={k} -> ");
        match (s.status, s.candidate) {
            (Status::Ok, Some(c)) => {
                let via = match s.via {
                    Via::Overlay => "overlay",
                    Via::Tree => "tree",
                    Via::Model => "model",
                    Via::None => "none",
                };
                println!(
                    "{} (family {}, tile {}) bpp={} partitions={} via {via}",
                    c.id, c.family, c.tile, s.bpp, s.partitions
                );
            }
            (status, _) => println!("refused: {}", refusal(status)),
        }
    }
}

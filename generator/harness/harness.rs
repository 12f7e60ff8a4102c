// Validation harness for a generated Rust module: the same protocol as harness.cpp.
#[path = "vnni_dispatch.rs"]
mod dispatch;

use std::io::{BufWriter, Write};

use dispatch::{KbKind, Status, Surface, Via};

fn surface_name(s: Surface) -> &'static str {
    match s {
        Surface::Decode => "decode",
        Surface::Grouped => "grouped",
        Surface::Prefill => "prefill",
    }
}

fn kb_name(k: KbKind) -> &'static str {
    match k {
        KbKind::Wide => "wide",
        KbKind::Literal => "literal",
        KbKind::Waves => "waves",
        KbKind::Inherited => "inherited",
        KbKind::Capped => "capped",
    }
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::BadShape => "bad_shape",
        Status::UnknownCodebook => "unknown_codebook",
        Status::UnknownMode => "unknown_mode",
        Status::NoSelection => "no_selection",
    }
}

fn name_at(names: &[&'static str], i: i64) -> &'static str {
    usize::try_from(i).ok().and_then(|i| names.get(i).copied()).unwrap_or("(unknown)")
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: harness QUERIES");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    for c in dispatch::CANDIDATES {
        writeln!(
            out,
            "candidate {} {} {} {} {} {} {} {} {} {}",
            c.id,
            c.family,
            surface_name(c.surface),
            c.tile,
            c.cpt,
            c.rows,
            kb_name(c.kb_kind),
            c.kb_param,
            c.max_kb,
            u8::from(c.generic_legal)
        )
        .unwrap();
    }
    for line in text.lines() {
        let v: Vec<i64> = line.split_whitespace().map(|x| x.parse().expect("an integer")).collect();
        let [cb, mode, m, n, k] = v[..] else { panic!("bad query line {line:?}") };
        let (cb, mode) = (name_at(dispatch::CODEBOOKS, cb), name_at(dispatch::MODES, mode));
        // Each entry point on the M range it is meant for.
        let s = match m {
            1 => dispatch::select_decode(cb, mode, n, k),
            _ if m < 32 => dispatch::select_grouped(cb, mode, m, n, k),
            _ => dispatch::select_prefill(cb, mode, m, n, k),
        };
        match s.candidate {
            Some(c) if s.status == Status::Ok => writeln!(
                out,
                "ok {} {} {} {} {} {} {}",
                c.id,
                c.family,
                surface_name(c.surface),
                s.bpp,
                s.partitions,
                match s.via {
                    Via::Overlay => "overlay",
                    Via::Model => "model",
                    _ => "tree",
                },
                s.domain
            ),
            _ => writeln!(out, "{}", status_name(s.status)),
        }
        .unwrap();
    }
    out.flush().unwrap();
}

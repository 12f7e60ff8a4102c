//! `vnni-dispatch report` end to end on a sealed synthetic corpus: every PNG the Markdown
//! links exists, decodes as RGB of the expected size, is not blank and has its title drawn;
//! its SVG twin is linked and carries the title and axis labels as text; the Markdown names
//! every codebook; the same corpus and policy give the same bytes; an unsealed corpus is refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use vnni_learner::chart::{decode_png, PALETTE};
use vnni_learner::corpus_report::{PANEL, PANELS_PER_ROW, PLOT};
use vnni_learner::synthetic::{write, Spec};

fn report(corpus: &Path, policy: Option<&Path>, out: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"));
    c.arg("report").arg("--corpus").arg(corpus).arg("--out").arg(out);
    if let Some(p) = policy {
        c.arg("--policy").arg(p);
    }
    c.output().unwrap()
}

fn ok(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    stdout
}

/// The PNG files `report.md` links, in order.
fn linked_pngs(md: &str) -> Vec<String> {
    md.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|l| l.ends_with(".png"))
        .map(String::from)
        .collect()
}

fn files(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
}

#[test]
fn the_report_draws_every_plot_and_names_every_codebook() {
    let root = std::env::temp_dir().join(format!("vnni-cli-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let corpus = root.join("corpus");
    write(&corpus, &Spec::cpu(5)).unwrap();
    // A policy to report on: `fit` writes it even where a gate fails (and then exits non-zero).
    let policy = root.join("fit").join("policy.json");
    let _ = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
        .args(["fit", "--ucb-max", "0.08", "--corpus"])
        .arg(&corpus)
        .arg("--out")
        .arg(&policy)
        .arg("--ledger")
        .arg(root.join("ledger.json"))
        .output()
        .unwrap();
    assert!(policy.is_file(), "fit wrote no policy");

    let out = root.join("report");
    let stdout = ok(&report(&corpus, Some(&policy), &out));
    assert!(stdout.contains("report.md"), "{stdout}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();

    // Every codebook of the corpus is named, has a bandwidth plot and a CDF panel.
    for codebook in ["s4", "u4", "s8"] {
        assert!(md.contains(&format!("### {codebook}")), "report.md does not name {codebook}");
        assert!(
            md.contains(&format!("| {codebook} decode |")) && md.contains(&format!("| {codebook} grouped |")),
            "{codebook}"
        );
    }
    assert!(md.contains("given policy (in-sample)") && md.contains("log2 lookup") && md.contains("auto"), "{md}");
    // A synthetic corpus has no per-cell times: the throughput section says so.
    assert!(md.contains("## Collection throughput") && md.contains("did not record how long"), "{md}");

    let pngs = linked_pngs(&md);
    let plot = (PLOT.0 as usize, PLOT.1 as usize);
    let expected_size = |name: &str| match name {
        n if n.starts_with("bandwidth-") || n == "regret-cdf-codebooks.png" => Some(plot),
        _ => None,
    };
    for kind in
        ["bandwidth-s4.png", "bandwidth-u4.png", "bandwidth-s8.png", "regret-cdf.png", "regret-cdf-codebooks.png"]
    {
        assert!(pngs.iter().any(|p| p == kind), "report.md links no {kind}: {pngs:?}");
    }
    assert!(pngs.iter().filter(|p| p.starts_with("map-")).count() >= 2, "{pngs:?}");
    for name in &pngs {
        let bytes = std::fs::read(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (w, h, pixels) = decode_png(&bytes).unwrap_or_else(|e| panic!("{name} is not an RGB PNG: {e}"));
        if let Some(size) = expected_size(name) {
            assert_eq!((w, h), size, "{name}");
        }
        if name == "regret-cdf.png" {
            // Three codebooks x (decode, grouped): 6 panels, 4 per row, the legend under them.
            assert_eq!(w, PANELS_PER_ROW * PANEL.0 as usize, "{name}");
            assert!(h > 2 * PANEL.1 as usize, "{name}: no room for the legend");
        }
        // The title is rasterized: dark pixels in the band at the top of the image.
        let dark = pixels[..w * 30].iter().filter(|p| p.iter().all(|&v| v < 90)).count();
        assert!(dark > 40, "{name} has no title text");
        let svg_name = name.replace(".png", ".svg");
        assert!(md.contains(&format!("]({svg_name})")), "report.md does not link {svg_name}");
        let svg = std::fs::read_to_string(out.join(&svg_name)).unwrap_or_else(|e| panic!("{svg_name}: {e}"));
        assert!(svg.starts_with("<svg") && svg.contains("</text>"), "{svg_name} has no text");
        let axis = if name.starts_with("map-") {
            "K, reduction length"
        } else if name.starts_with("bandwidth-") {
            "GB/s"
        } else {
            "fraction of cells"
        };
        assert!(svg.contains(axis), "{svg_name} has no axis label {axis:?}");
        assert_eq!(pixels.len(), w * h, "{name}");
        let colours: BTreeSet<[u8; 3]> = pixels.iter().copied().collect();
        assert!(colours.len() > 1, "{name} is blank");
        if expected_size(name).is_some() {
            // A plot, not just its grid: some series colour was drawn.
            assert!(PALETTE.iter().any(|c| colours.contains(c)), "{name} has no data: only {colours:?}");
        }
    }

    // Same corpus and policy, same bytes.
    let again = root.join("again");
    ok(&report(&corpus, Some(&policy), &again));
    let names = |d: &Path| files(d).into_iter().map(|p| p.file_name().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(names(&out), names(&again));
    for f in files(&out) {
        let other = again.join(f.file_name().unwrap());
        assert!(
            std::fs::read(&f).unwrap() == std::fs::read(&other).unwrap(),
            "{} differs between two runs",
            f.display()
        );
    }
}

#[test]
fn an_unsealed_corpus_is_refused() {
    let dir = std::env::temp_dir().join(format!("vnni-cli-report-unsealed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = report(&dir, None, &dir.join("out"));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not sealed"), "{err}");
    assert!(!dir.join("out").join("report.md").exists());
}

/// Every file under `dir`, recursively.
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p);
            }
        }
    }
    out
}

#[test]
fn words_from_a_policy_or_a_corpus_never_reach_a_path_outside_out() {
    let root = std::env::temp_dir().join(format!("vnni-cli-report-escape-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let corpus = root.join("sandbox/corpus");
    write(&corpus, &Spec { ns: vec![256, 512], ks: vec![256, 512], ms: vec![1, 2], sealed_every: 0, ..Spec::cpu(8) })
        .unwrap();
    let fitted = root.join("sandbox/fit/policy.json");
    let _ = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
        .arg("fit")
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(&fitted)
        .arg("--ledger")
        .arg(root.join("sandbox/fit/ledger.json"))
        .output();
    assert!(fitted.is_file());
    let before = tree(&root);

    // A policy whose mode is a path.
    let mut p = vnni_policy::Policy::from_bytes(&std::fs::read(&fitted).unwrap()).unwrap();
    p.modes = vec!["x/../../../PWN".into()];
    for d in &mut p.domains {
        d.mode = "x/../../../PWN".into();
    }
    let hostile = root.join("sandbox/hostile.json");
    std::fs::write(&hostile, p.to_bytes()).unwrap();
    let o = report(&corpus, Some(&hostile), &root.join("sandbox/out/r"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("unknown mode"), "{err}");

    // A corpus whose mode column was edited and resealed from its plan.
    let rows = corpus.join("decode_m1.development.csv");
    let text = std::fs::read_to_string(&rows).unwrap().replacen(",eager,", ",x/../../../PWN,", 1);
    std::fs::write(&rows, text).unwrap();
    let plan = vnni_corpus::collection::CollectionPlan::read(&corpus.join("plan.json")).unwrap();
    vnni_corpus::seal::seal(&corpus, &plan.seal_inputs()).unwrap();
    let o = report(&corpus, None, &root.join("sandbox/out/r2"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("decode_m1.development.csv") && err.contains("mode"), "{err}");

    let after: BTreeSet<PathBuf> =
        tree(&root).into_iter().filter(|p| !p.starts_with(root.join("sandbox/out"))).collect();
    let new: Vec<_> = after
        .difference(&before)
        .filter(|p| !p.ends_with("corpus.manifest.json") && !p.ends_with("hostile.json"))
        .collect();
    assert!(new.is_empty(), "files written outside --out: {new:?}");
    assert!(!root.join("PWN-m1.png").exists() && !std::env::temp_dir().join("PWN-m1.png").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// A dense-M line as `bench --dense-m` writes it: a dispatched rows kernel that falls behind
/// at M = 9 (a second pass) and cannot launch at M = 11.
fn dense_rows() -> Vec<vnni_corpus::schema::DenseMRow> {
    let row = |m: usize, best: &str, best_us: f64, disp: Option<f64>| vnni_corpus::schema::DenseMRow {
        mode: "graph".parse().unwrap(),
        source_format: "Q4_K".parse().unwrap(),
        codebook: "u4".parse().unwrap(),
        n: 28_672,
        k: 8192,
        m,
        m1_candidate: "decode.wide.tn128.cpt2".parse().unwrap(),
        bpp: 256,
        timed: 9,
        best: best.parse().unwrap(),
        best_us,
        dispatched: Some("grouped.rows.r8".parse().unwrap()),
        dispatched_us: disp,
        note: if disp.is_none() { "not runnable".into() } else { String::new() },
    };
    let imma = "grouped.imma.16x128.w1x4.std";
    vec![
        row(8, "grouped.rows.r8", 40.0, Some(40.0)),
        row(9, imma, 44.0, Some(75.0)),
        row(10, imma, 44.5, Some(76.0)),
        row(11, imma, 45.0, None),
    ]
}

#[test]
fn the_dense_m_report_lists_the_cliffs_of_every_file() {
    let root = std::env::temp_dir().join(format!("vnni-cli-dense-m-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let rows = dense_rows();
    let (a, b) = (root.join("a.csv"), root.join("b.csv"));
    vnni_corpus::write_csv(&a, &rows[..2]).unwrap();
    vnni_corpus::write_csv(&b, &rows[2..]).unwrap();
    let out = root.join("report");
    let run = |files: &str| {
        Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
            .args(["report", "--dense-m", files, "--out"])
            .arg(&out)
            .output()
            .unwrap()
    };
    let stdout = ok(&run(&format!("{},{}", a.display(), b.display())));
    assert!(stdout.contains("4 rows, 4 cliffs, 1 charts"), "{stdout}");
    let md = std::fs::read_to_string(out.join("dense-m.md")).unwrap();
    for want in [
        "| step | dispatched | 8 | 9 | 1.88 |",
        "| behind | dispatched | 9 | - | 1.70 |",
        "| untimed | dispatched | 11 |",
        "8 -> 9: grouped.rows.r8 -> grouped.imma.16x128.w1x4.std",
    ] {
        assert!(md.contains(want), "{want} not in\n{md}");
    }
    for png in linked_pngs(&md) {
        let (w, h, pixels) = decode_png(&std::fs::read(out.join(&png)).unwrap()).unwrap();
        assert_eq!((w, h), (960, 560));
        assert!(pixels.iter().any(|p| *p == PALETTE[1]), "{png}: the dispatched line is not drawn");
    }
    // a row in two files, or twice in one, is refused, naming the file (and line)
    vnni_corpus::write_csv(&b, &rows[1..]).unwrap();
    let o = run(&format!("{},{}", a.display(), b.display()));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("M = 9 is also in") && err.contains("a.csv"), "{err}");
    vnni_corpus::write_csv(&b, &[rows[2].clone(), rows[2].clone()]).unwrap();
    let o = run(&b.display().to_string());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("b.csv:3: column m: duplicate"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

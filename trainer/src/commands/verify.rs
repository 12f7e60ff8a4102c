//! `vnni-dispatch verify [--corpus DIR]`: authenticate sealed corpora against this checkout
//! (registry and inventory digests, every payload's size and sha256); then, for every
//! committed table set (`lfs-data/tables/**/policy.json`), refit its corpus and regenerate its
//! tables and require both to be byte-identical to what is committed. No GPU needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::seal::{verify, Expected, MANIFEST};
use vnni_kernels::registry::fittable_digests;
use vnni_learner::{fit, FitOptions};
use vnni_policy::Policy;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// A corpus directory; without it every corpus committed under --root.
    #[arg(long)]
    pub corpus: Vec<PathBuf>,
    #[arg(long, default_value = "corpus/inventory")]
    pub inventory: PathBuf,
    #[arg(long, default_value = "lfs-data/corpora")]
    pub root: PathBuf,
    /// Committed table sets (each a directory with policy.json and the generated files).
    #[arg(long, default_value = "lfs-data/tables")]
    pub tables: PathBuf,
    /// Committed profiler evidence (`profile`; each directory bound to a corpus under --root).
    #[arg(long, default_value = "lfs-data/evidence")]
    pub evidence: PathBuf,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        let mut a = Argv::new("verify");
        for c in &self.corpus {
            a = a.path("corpus", c);
        }
        a.path("inventory", &self.inventory)
            .path("root", &self.root)
            .path("tables", &self.tables)
            .path("evidence", &self.evidence)
            .done()
    }
}

/// Directories under `root` holding `file`, sorted.
pub fn holding(root: &Path, file: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join(file).is_file() {
            out.push(d.clone());
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()));
        }
    }
    out.sort();
    out
}

/// What a corpus of this checkout must bind: a registry digest of a generation it can fit,
/// and per profile of the inventory its inventory digest and the registry digests of its M values.
pub fn expected(inventory: &Path) -> Result<Expected> {
    let inv = Inventory::load(inventory).with_context(|| format!("loading the inventory {}", inventory.display()))?;
    let mut expected = Expected { registry_digest: fittable_digests(&[1]), ..Default::default() };
    for name in inv.profiles.keys() {
        let plan = inv.resolve(name)?;
        expected.inventory_digests.insert(name.clone(), plan.digest());
        expected.registry_digests.insert(name.clone(), fittable_digests(&plan.m));
    }
    Ok(expected)
}

/// Directories under `root` that hold files but are not inside a sealed corpus (no
/// manifest in them or above them up to `root`): what verify cannot vouch for.
fn unsealed(root: &Path, corpora: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if corpora.iter().any(|c| d.starts_with(c)) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        let mut has_files = false;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                has_files = true;
            }
        }
        if has_files {
            out.push(d);
        }
    }
    out.sort();
    out
}

/// The verified corpus (id and directory) an evidence directory's requests were drawn from.
fn evidence_corpus<'v>(dir: &Path, verified: &'v BTreeMap<String, PathBuf>) -> Result<(&'v String, &'v PathBuf)> {
    let path = dir.join(vnni_corpus::evidence::REQUEST_MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let manifest: vnni_corpus::evidence::RequestManifest =
        serde_json::from_str(&text).with_context(|| format!("{}: not a request manifest", path.display()))?;
    verified.get_key_value(&manifest.corpus_id).with_context(|| {
        format!(
            "drawn from corpus {}, which is not among the verified corpora: commit it beside the evidence",
            manifest.corpus_id
        )
    })
}

pub fn run(a: &Args) -> Result<()> {
    let expected = expected(&a.inventory)?;
    if a.corpus.is_empty() && !a.root.is_dir() {
        bail!("{}: no such directory: there is nothing to verify (pass --root or --corpus)", a.root.display());
    }
    let dirs = if a.corpus.is_empty() { holding(&a.root, MANIFEST) } else { a.corpus.clone() };
    if a.corpus.is_empty() {
        let strays = unsealed(&a.root, &dirs);
        if !strays.is_empty() {
            bail!(
                "{} directories under {} hold files but no corpus.manifest.json (first: {}): seal them, or remove them",
                strays.len(),
                a.root.display(),
                strays[0].display()
            );
        }
    }
    if dirs.is_empty() {
        println!("verify: no sealed corpus under {} (nothing to check yet)", a.root.display());
        return Ok(());
    }
    let mut bad = 0;
    let mut verified: BTreeMap<String, PathBuf> = BTreeMap::new();
    for d in &dirs {
        match verify(d, &expected) {
            Ok(m) => {
                println!("ok   {} ({} payloads, corpus id {})", d.display(), m.identity.payloads.len(), m.corpus_id);
                verified.insert(m.corpus_id, d.clone());
            }
            Err(e) => {
                bad += 1;
                println!("FAIL {}: {e}", d.display());
            }
        }
    }
    if bad > 0 {
        bail!("{bad} of {} corpora failed verification", dirs.len());
    }
    if !a.corpus.is_empty() {
        return Ok(());
    }
    for e in holding(&a.evidence, vnni_corpus::evidence::EVIDENCE_MANIFEST) {
        let authenticated = evidence_corpus(&e, &verified).and_then(|(id, corpus)| {
            super::profile::authenticate(&e, id, &vnni_corpus::collection::read_corpus_rows(corpus)?)
        });
        match authenticated {
            Ok((requests, rows)) => {
                let records = super::profile::record_count(&rows);
                println!("ok   {} ({} requests, {records} records, every claim held)", e.display(), requests.len())
            }
            Err(err) => {
                bad += 1;
                println!("FAIL {}: {err:#}", e.display());
            }
        }
    }
    for t in holding(&a.tables, "policy.json") {
        if let Err(e) = refit(&t, &verified) {
            bad += 1;
            println!("FAIL {}: {e:#}", t.display());
        }
    }
    if bad > 0 {
        bail!("{bad} committed table sets are not reproduced by their corpora");
    }
    Ok(())
}

/// Refit the corpus a committed policy names, regenerate, and compare bytes.
fn refit(tables: &Path, corpora: &BTreeMap<String, PathBuf>) -> Result<()> {
    let policy_path = tables.join("policy.json");
    let committed = std::fs::read(&policy_path).with_context(|| format!("reading {}", policy_path.display()))?;
    let policy =
        Policy::from_bytes(&committed).with_context(|| format!("{} is not a policy", policy_path.display()))?;
    let id = &policy.provenance.corpus_id;
    let corpus = corpora
        .get(id)
        .with_context(|| format!("its policy names corpus {id}, which is not committed under lfs-data/corpora"))?;
    // The thresholds the policy was held to; no ledger: this is a recomputation, not a new fit.
    let g = &policy.gates;
    let opts = FitOptions {
        p95_max: g.p95_max,
        ucb_max: g.ucb_max,
        min_pass: g.min_pass_fraction,
        ledger: None,
        // The policy does not depend on the report's leave-one-family-out rows.
        family_cv: false,
        // A development-only policy never looked at its sealed rows.
        certify_sealed: !policy.provenance.development_only,
        ..Default::default()
    }
    // The correction, row weighting and twin reading it was fitted with (none in policies from
    // before them).
    .with_rules_of(&policy);
    // Pair evidence a fit applied lives beside its tables: `pairs.samples.csv` (and
    // `m1-pairs.samples.csv` for the M = 1 stage a staged policy froze), checked by digest.
    let pairs = pair_file(tables, "", policy.provenance.pairs.as_ref())?;
    let opts = FitOptions { pairs, ..opts };
    // A staged policy: its frozen M = 1 part is refitted from its M = 1 corpus (statistics
    // too), and the batched buckets are refitted beside that refit, not beside the committed text.
    let frozen_m1 = match &policy.provenance.frozen_m1 {
        Some(f) => {
            let m1 = corpora.get(&f.m1_corpus_id).with_context(|| {
                format!(
                    "its frozen M = 1 stage names corpus {}, which is not committed under lfs-data/corpora",
                    f.m1_corpus_id
                )
            })?;
            let m1_opts = FitOptions { pairs: pair_file(tables, "m1-", f.m1_pairs.as_ref())?, ..opts.clone() };
            let m1_policy = fit(m1, &m1_opts)?.policy;
            let digest = m1_policy.m1_digest();
            if digest != f.m1_digest {
                bail!(
                    "refitting its M = 1 corpus {} gives another M = 1 part (digest {} vs frozen {}): the learner or the corpus changed",
                    m1.display(),
                    vnni_policy::short(&digest),
                    vnni_policy::short(&f.m1_digest)
                );
            }
            Some(m1_policy)
        }
        None => None,
    };
    let opts = FitOptions { frozen_m1, ..opts };
    let mut refit = fit(corpus, &opts)?;
    refit.policy.provenance.development_only = policy.provenance.development_only;
    if refit.policy.to_bytes() != committed {
        bail!("refitting {} gives another policy (sha256 {} vs committed {}): the learner or the corpus changed; refit and commit", corpus.display(), refit.policy.digest(), policy.digest());
    }
    // Rendered from the committed text, as `generate --policy` does.
    let rendered = vnni_generator::render(&policy)?;
    for (name, text) in rendered.files() {
        let path = tables.join(name);
        let on_disk = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if on_disk != text.as_bytes() {
            bail!("{} differs from the tables regenerated from its policy: regenerate and commit", path.display());
        }
    }
    let stage = policy.provenance.frozen_m1.as_ref().map_or(String::new(), |f| {
        format!("; its frozen M = 1 part refit from corpus {}", vnni_policy::short(&f.m1_corpus_id))
    });
    println!("ok   {} (refit and regenerated byte for byte from corpus {}{stage})", tables.display(), &id[..16]);
    Ok(())
}

/// The pair samples `applied` names, beside the tables (`{prefix}pairs.samples.csv`), checked
/// against the recorded sha256; `None` when the fit applied none.
fn pair_file(tables: &Path, prefix: &str, applied: Option<&vnni_policy::PairEvidence>) -> Result<Option<PathBuf>> {
    let Some(applied) = applied else { return Ok(None) };
    let (path, want) = (tables.join(format!("{prefix}{}", super::remeasure::PAIR_SAMPLES)), &applied.sha256);
    let bytes = std::fs::read(&path).with_context(|| {
        format!("its policy applied pair samples (sha256 {}): {} is missing", vnni_policy::short(want), path.display())
    })?;
    let got = vnni_kernels::digest::sha256_hex(&bytes);
    if got != *want {
        bail!(
            "{}: sha256 {} is not the {} its policy applied",
            path.display(),
            vnni_policy::short(&got),
            vnni_policy::short(want)
        );
    }
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use vnni_corpus::seal::{Manifest, MANIFEST};

    /// A committed corpus binds the plan its profile resolved to when it was collected: a
    /// change to the inventory or to the format registry that moves that plan (a new format
    /// joining a profile with no `formats` list) makes `verify` refuse the corpus. The same
    /// rule, checked here in seconds without hashing payloads or refitting.
    #[test]
    fn every_committed_corpus_still_matches_its_profile() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let expected = super::expected(&root.join("corpus/inventory")).unwrap();
        let corpora = super::holding(&root.join("lfs-data/corpora"), MANIFEST);
        assert!(corpora.len() >= 8, "{} committed corpora", corpora.len());
        for dir in corpora {
            let m: Manifest = serde_json::from_slice(&std::fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
            let inputs = &m.identity.inputs;
            assert_eq!(
                expected.inventory_digests.get(&inputs.profile),
                Some(&inputs.inventory_digest),
                "{}: profile {}",
                dir.display(),
                inputs.profile
            );
        }
    }
}

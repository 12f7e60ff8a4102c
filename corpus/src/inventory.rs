//! The shape inventory (`corpus/inventory/*.toml`) and its profiles. The inventory owns
//! shapes: model projections, the synthetic certification grid, smoke shapes; a profile
//! selects shapes, partitions, formats, M values, modes and sample counts, and resolves to a
//! plan whose digest (sha256 of its canonical JSON) names the corpus generation. Every error
//! names the file and line at fault.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vnni_kernels::digest::sha256_hex;
use vnni_kernels::{Mode, SourceFormat};

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}:{line}:{column}: {message}")]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}:{line}: {message}")]
    Invalid { path: PathBuf, line: usize, message: String },
    #[error("unknown profile {name:?} (known: {known})")]
    UnknownProfile { name: String, known: String },
    #[error("profile {name:?} selects no shapes")]
    EmptyProfile { name: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    Development,
    Sealed,
}

impl Partition {
    /// `development` or `sealed`, as in the corpus file names.
    pub fn name(self) -> &'static str {
        match self {
            Partition::Development => "development",
            Partition::Sealed => "sealed",
        }
    }
}

/// Where a shape was defined.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Location {
    pub file: String,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub name: String,
    pub family: String,
    pub role: String,
    pub n: usize,
    pub k: usize,
    pub exact_overlay: bool,
    pub partition: Partition,
    /// The source formats this shape is measured in (every format whose block divides K
    /// unless the file narrows it).
    pub formats: Vec<SourceFormat>,
    #[serde(skip)]
    pub location: Location,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub description: String,
    /// Shape names; `prefix*`, `*suffix` and `*` globs.
    pub shapes: Vec<String>,
    #[serde(default)]
    pub exact_overlay_only: bool,
    pub partitions: Vec<Partition>,
    /// Formats to keep (default: all the shape allows).
    #[serde(default)]
    pub formats: Option<Vec<String>>,
    pub m: Vec<usize>,
    pub modes: Vec<Mode>,
    pub warmups: usize,
    pub samples: usize,
    /// Independent timing passes per cell (default 1), each of `warmups` + `samples` rounds.
    #[serde(default = "one")]
    pub passes: usize,
    /// A workflow proxy (family-smoke): never installable; `refresh` judges it by the proxy
    /// verdict (every stage healthy) instead of the production gates.
    #[serde(default)]
    pub proxy: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShape {
    name: String,
    family: String,
    role: String,
    n: i64,
    k: i64,
    exact_overlay: bool,
    partition: Partition,
    #[serde(default)]
    formats: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Grid {
    n: Vec<i64>,
    k: Vec<i64>,
    sealed_every: usize,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    shape: Vec<toml::Spanned<RawShape>>,
    #[serde(default)]
    grid: Option<toml::Spanned<Grid>>,
    #[serde(default)]
    profile: BTreeMap<String, toml::Spanned<Profile>>,
}

#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Sorted by name.
    pub shapes: Vec<Shape>,
    pub profiles: BTreeMap<String, Profile>,
}

/// 1-based line numbers of byte offsets, by binary search over the line starts (counting
/// newlines from the start for every shape made loading quadratic in the file's length).
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Lines {
        Lines(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect())
    }

    fn of(&self, offset: usize) -> usize {
        self.0.partition_point(|&nl| nl < offset) + 1
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    Lines::new(text).of(offset)
}

/// The largest dimension accepted: every product the kernels form stays in range.
pub const MAX_DIM: i64 = 1 << 31;

/// Validate one geometry for the inventory: positive, K a multiple of 32, below 2^31.
fn check_dims(n: i64, k: i64) -> Result<(usize, usize), String> {
    if n <= 0 || k <= 0 {
        return Err(format!("N = {n} and K = {k} must be positive"));
    }
    if n >= MAX_DIM || k >= MAX_DIM || (n as i128) * (k as i128) >= 1i128 << 40 {
        return Err(format!("{n} x {k} overflows the supported range (each < 2^31, N*K < 2^40)"));
    }
    if k % 32 != 0 {
        return Err(format!("K = {k} is not a multiple of 32"));
    }
    Ok((n as usize, k as usize))
}

/// Formats for K: explicit ones must be legal (K a multiple of their block), implicit ones are
/// every legal format.
fn formats_for(k: usize, explicit: Option<&[String]>) -> Result<Vec<SourceFormat>, String> {
    match explicit {
        None => Ok(SourceFormat::ALL.into_iter().filter(|f| k % f.block_elems() == 0).collect()),
        Some(names) => names
            .iter()
            .map(|s| {
                let f: SourceFormat = s.parse().map_err(|e| format!("{e}"))?;
                if k % f.block_elems() != 0 {
                    return Err(format!("K = {k} is not a multiple of {} (the {f} block)", f.block_elems()));
                }
                Ok(f)
            })
            .collect(),
    }
}

impl Inventory {
    /// Load every `*.toml` of `dir` (sorted by file name).
    pub fn load(dir: &Path) -> Result<Inventory, InventoryError> {
        let io = |e: std::io::Error| InventoryError::Io { path: dir.to_path_buf(), message: e.to_string() };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        let mut inv = Inventory::default();
        let mut grids = Vec::new();
        for path in &files {
            let text = std::fs::read_to_string(path)
                .map_err(|e| InventoryError::Io { path: path.clone(), message: e.to_string() })?;
            inv.add_file(path, &text, &mut grids)?;
        }
        for (path, text, grid) in grids {
            inv.add_grid(&path, &text, grid)?;
        }
        inv.shapes.sort_by(|a, b| a.name.cmp(&b.name));
        inv.check()?;
        Ok(inv)
    }

    fn add_file(
        &mut self,
        path: &Path,
        text: &str,
        grids: &mut Vec<(PathBuf, String, toml::Spanned<Grid>)>,
    ) -> Result<(), InventoryError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            let line = line_of(text, at);
            let column = at - text[..at.min(text.len())].rfind('\n').map_or(0, |i| i + 1) + 1;
            InventoryError::Parse { path: path.to_path_buf(), line, column, message: e.message().to_string() }
        })?;
        let file = path.display().to_string();
        let lines = Lines::new(text);
        for s in raw.shape {
            let line = lines.of(s.span().start);
            let r = s.into_inner();
            let invalid = |message: String| InventoryError::Invalid {
                path: path.to_path_buf(),
                line,
                message: format!("shape {:?}: {message}", r.name),
            };
            let (n, k) = check_dims(r.n, r.k).map_err(invalid)?;
            let formats = formats_for(k, r.formats.as_deref()).map_err(invalid)?;
            if formats.is_empty() {
                return Err(invalid("no format applies".into()));
            }
            self.shapes.push(Shape {
                name: r.name.clone(),
                family: r.family,
                role: r.role,
                n,
                k,
                exact_overlay: r.exact_overlay,
                partition: r.partition,
                formats,
                location: Location { file: file.clone(), line },
            });
        }
        if let Some(g) = raw.grid {
            grids.push((path.to_path_buf(), text.to_string(), g));
        }
        for (name, p) in raw.profile {
            let line = lines.of(p.span().start);
            let p = p.into_inner();
            if p.m.is_empty() || p.m.contains(&0) || p.samples == 0 || p.passes == 0 {
                return Err(InventoryError::Invalid {
                    path: path.to_path_buf(),
                    line,
                    message: format!("profile {name:?}: M values must be positive, samples > 0 and passes > 0"),
                });
            }
            self.profiles.insert(name, p);
        }
        Ok(())
    }

    /// Grid points not already model shapes, alternating partitions in (N, K) order.
    fn add_grid(&mut self, path: &Path, text: &str, g: toml::Spanned<Grid>) -> Result<(), InventoryError> {
        let line = line_of(text, g.span().start);
        let g = g.into_inner();
        let taken: BTreeSet<(usize, usize)> = self.shapes.iter().map(|s| (s.n, s.k)).collect();
        let mut i = 0;
        for &n in &g.n {
            for &k in &g.k {
                let (n, k) = check_dims(n, k).map_err(|message| InventoryError::Invalid {
                    path: path.to_path_buf(),
                    line,
                    message: format!("grid: {message}"),
                })?;
                if taken.contains(&(n, k)) {
                    continue;
                }
                i += 1;
                let partition = if g.sealed_every > 0 && i % g.sealed_every == 0 {
                    Partition::Sealed
                } else {
                    Partition::Development
                };
                self.shapes.push(Shape {
                    name: format!("grid.{n}x{k}"),
                    family: "grid".into(),
                    role: "grid".into(),
                    n,
                    k,
                    exact_overlay: false,
                    partition,
                    formats: formats_for(k, None).expect("implicit formats"),
                    location: Location { file: path.display().to_string(), line },
                });
            }
        }
        Ok(())
    }

    /// Names are unique; no geometry is in both partitions.
    fn check(&self) -> Result<(), InventoryError> {
        for w in self.shapes.windows(2) {
            if w[0].name == w[1].name {
                return Err(InventoryError::Invalid {
                    path: PathBuf::from(&w[1].location.file),
                    line: w[1].location.line,
                    message: format!(
                        "shape name {:?} is also defined at {}:{}",
                        w[1].name, w[0].location.file, w[0].location.line
                    ),
                });
            }
        }
        let mut seen: BTreeMap<(usize, usize), &Shape> = BTreeMap::new();
        for s in &self.shapes {
            if let Some(other) = seen.insert((s.n, s.k), s) {
                if other.partition != s.partition {
                    return Err(InventoryError::Invalid {
                        path: PathBuf::from(&s.location.file),
                        line: s.location.line,
                        message: format!(
                            "{} x {} is in both partitions ({:?} here, {} at {}:{})",
                            s.n, s.k, s.partition, other.name, other.location.file, other.location.line
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Resolve a profile to its plan.
    pub fn resolve(&self, name: &str) -> Result<InventoryPlan, InventoryError> {
        let p = self.profiles.get(name).ok_or_else(|| InventoryError::UnknownProfile {
            name: name.to_string(),
            known: self.profiles.keys().cloned().collect::<Vec<_>>().join(", "),
        })?;
        let keep_format =
            |f: &SourceFormat| p.formats.as_ref().is_none_or(|fs| fs.iter().any(|x| x.eq_ignore_ascii_case(f.name())));
        let mut geometries: BTreeMap<(usize, usize), PlanShape> = BTreeMap::new();
        for s in self.shapes.iter().filter(|s| {
            p.partitions.contains(&s.partition)
                && (!p.exact_overlay_only || s.exact_overlay)
                && p.shapes.iter().any(|g| glob(g, &s.name))
        }) {
            let e = geometries.entry((s.n, s.k)).or_insert_with(|| PlanShape {
                n: s.n,
                k: s.k,
                partition: s.partition,
                exact_overlay: false,
                formats: BTreeSet::new(),
                names: Vec::new(),
            });
            e.exact_overlay |= s.exact_overlay;
            e.formats.extend(s.formats.iter().copied().filter(keep_format));
            e.names.push(s.name.clone());
        }
        let shapes: Vec<PlanShape> = geometries.into_values().filter(|s| !s.formats.is_empty()).collect();
        if shapes.is_empty() {
            return Err(InventoryError::EmptyProfile { name: name.to_string() });
        }
        let mut m = p.m.clone();
        m.sort_unstable();
        m.dedup();
        Ok(InventoryPlan {
            profile: name.to_string(),
            m,
            modes: p.modes.clone(),
            warmups: p.warmups,
            samples: p.samples,
            passes: p.passes,
            shapes,
            proxy: p.proxy,
        })
    }
}

fn one() -> usize {
    1
}

fn is_one(v: &usize) -> bool {
    *v == 1
}

/// `*` matches any run of characters.
pub fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else { return false };
            if rest.is_empty() {
                return true;
            }
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

/// One geometry of a plan: every format and name that maps to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanShape {
    pub n: usize,
    pub k: usize,
    pub partition: Partition,
    pub exact_overlay: bool,
    pub formats: BTreeSet<SourceFormat>,
    pub names: Vec<String>,
}

/// A resolved profile. Its canonical JSON (field order fixed, shapes sorted by (N, K), formats
/// in registry order) is the same on every machine, and so is its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryPlan {
    pub profile: String,
    pub m: Vec<usize>,
    pub modes: Vec<Mode>,
    pub warmups: usize,
    pub samples: usize,
    /// Timing passes per cell (absent from the canonical JSON when 1, so the digests of
    /// one-pass plans did not change when passes were added).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub passes: usize,
    pub shapes: Vec<PlanShape>,
    /// A workflow proxy profile (absent from the canonical JSON when false, so the digests
    /// of production plans did not change when it was added).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub proxy: bool,
}

impl InventoryPlan {
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(self).expect("plans serialize")
    }

    pub fn digest(&self) -> String {
        sha256_hex(self.canonical_json().as_bytes())
    }

    /// Cells = (source format, N, K, M) x modes.
    pub fn cell_count(&self) -> usize {
        self.shapes.iter().map(|s| s.formats.len()).sum::<usize>() * self.m.len() * self.modes.len()
    }
}

/// Inventory shapes for the 2-D weights of a GGUF model in milestone-1 formats, one per
/// (role, N, K) with every format seen, as TOML text for `corpus/inventory/`.
/// What `import_toml` made of a model: the inventory TOML, its shape count, and the matrices
/// it skipped because their type is not supported yet (type name -> tensor names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub toml: String,
    pub shapes: usize,
    pub skipped: BTreeMap<String, Vec<String>>,
}

pub fn import_toml(model: &crate::gguf::GgufModel, family: &str, source: &str) -> Result<Imported, String> {
    let mut by_role: BTreeMap<(String, usize, usize), BTreeSet<SourceFormat>> = BTreeMap::new();
    let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &model.tensors {
        if let Some((n, k, f)) = t.weight() {
            check_dims(n as i64, k as i64).map_err(|e| format!("tensor {:?}: {e}", t.name))?;
            if k % f.block_elems() != 0 {
                return Err(format!("tensor {:?}: K = {k} is not a multiple of the {f} block", t.name));
            }
            by_role.entry((crate::gguf::role(&t.name), n, k)).or_default().insert(f);
        } else if let Some(type_name) = t.unsupported_type() {
            skipped.entry(type_name).or_default().push(t.name.clone());
        }
    }
    if by_role.is_empty() {
        let known: Vec<&str> = SourceFormat::ALL.iter().map(|f| f.name()).collect();
        return Err(format!("no weight matrix in a supported format ({})", known.join(", ")));
    }
    let family = family.replace(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'), "-");
    let mut out = format!("# Imported from {source} by `vnni-dispatch inventory import`.\n\n");
    let mut names = BTreeMap::<String, usize>::new();
    for ((role, n, k), formats) in &by_role {
        // Two weights with one role but different shapes (e.g. per-layer sizes) get suffixes.
        let count = names.entry(role.clone()).or_default();
        *count += 1;
        let name = if *count == 1 { format!("{family}.{role}") } else { format!("{family}.{role}.{count}") };
        let fs: Vec<String> = formats.iter().map(|f| format!("\"{}\"", f.name())).collect();
        out.push_str(&format!(
            "[[shape]]\nname = \"{name}\"\nfamily = \"{family}\"\nrole = \"{role}\"\nn = {n}\nk = {k}\nexact_overlay = true\npartition = \"development\"\nformats = [{}]\n\n",
            fs.join(", ")
        ));
    }
    Ok(Imported { toml: out, shapes: by_role.len(), skipped })
}

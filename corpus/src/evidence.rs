//! Profiler evidence beside a sealed corpus, never inside it: what was asked of Nsight Compute
//! (`requests.csv`, one extra launch per (cell, candidate) standing for every mode asked for,
//! bound to the corpus id by
//! `requests.manifest.json`), what ncu wrote (`ncu/*.csv`, one file per chunk of requests
//! and pass, kept so the evidence can be derived again), and the records per request in base units (`evidence.csv`, bound to all three by
//! `evidence.manifest.json`). Profiler durations are recorded here only: they never enter
//! timing rows or labels.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vnni_kernels::digest::sha256_hex;
use vnni_kernels::{CandidateId, Codebook, L2Prefetch, Mode, SourceFormat};

use crate::ncu::{self, NcuRecord, Pass};
use crate::schema::TimingRow;

pub const SCHEMA: &str = "vnni-evidence-v4";
pub const REQUESTS: &str = "requests.csv";
pub const REQUEST_MANIFEST: &str = "requests.manifest.json";
/// ncu's CSV per chunk of requests and pass (`ncu/000000.hw.csv` and `ncu/000000.sass.csv`
/// hold requests 0..chunk): each is one ncu process, so a cut run keeps the files it finished.
pub const NCU_DIR: &str = "ncu";
/// Requests per chunk unless asked otherwise.
pub const DEFAULT_CHUNK: usize = 256;
pub const EVIDENCE: &str = "evidence.csv";
pub const EVIDENCE_MANIFEST: &str = "evidence.manifest.json";

#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error(transparent)]
    Ncu(#[from] ncu::NcuError),
    #[error(transparent)]
    Read(#[from] crate::read::ReadError),
    #[error(transparent)]
    Write(#[from] crate::write::WriteError),
}

fn file_err(path: &Path, message: impl Into<String>) -> EvidenceError {
    EvidenceError::File { path: path.to_path_buf(), message: message.into() }
}

/// The cell, candidate and mode of one profiled launch (its key in every evidence file).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProfileKey {
    pub source_format: SourceFormat,
    pub codebook: Codebook,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub mode: Mode,
    pub candidate: CandidateId,
    /// Batched rows: the M = 1 candidate whose bpp they inherit (empty for decode).
    pub m1_candidate: Option<CandidateId>,
    pub bpp: usize,
}

impl ProfileKey {
    /// The key of a timing row (None for a baseline, which has no kernel of ours).
    pub fn of_row(r: &TimingRow) -> Option<ProfileKey> {
        Some(ProfileKey {
            source_format: r.source_format?,
            codebook: r.codebook?,
            m: r.m,
            n: r.n,
            k: r.k,
            mode: r.mode,
            candidate: r.candidate.clone(),
            m1_candidate: r.m1_candidate.clone(),
            bpp: r.bpp,
        })
    }
}

impl std::fmt::Display for ProfileKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} M={} {}x{} {} {} (bpp {})",
            self.source_format, self.codebook, self.m, self.n, self.k, self.mode, self.candidate, self.bpp
        )
    }
}

/// `key()` of a row that spells the key's fields out (the csv crate cannot flatten a struct).
macro_rules! keyed {
    ($row:ty) => {
        impl $row {
            pub fn key(&self) -> ProfileKey {
                ProfileKey {
                    source_format: self.source_format,
                    codebook: self.codebook,
                    m: self.m,
                    n: self.n,
                    k: self.k,
                    mode: self.mode,
                    candidate: self.candidate.clone(),
                    m1_candidate: self.m1_candidate.clone(),
                    bpp: self.bpp,
                }
            }
        }
    };
}
keyed!(ProfileRequest);
keyed!(EvidenceRow);

/// One launch to profile (`requests.csv`), in launch order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRequest {
    pub request: usize,
    pub source_format: SourceFormat,
    pub codebook: Codebook,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The mode of the profiled launch (a graph replayed, or kernels launched on the stream).
    pub mode: Mode,
    /// Every mode the launch stands for, `;`-separated in order, `mode` first: graph and eager
    /// run the same kernels with the same arguments, so ncu (which flushes the caches before
    /// each replay pass) counts the same events for both, and one launch serves both keys.
    pub modes: String,
    pub candidate: CandidateId,
    /// Batched rows: the M = 1 candidate whose bpp they inherit (empty for decode).
    pub m1_candidate: Option<CandidateId>,
    pub bpp: usize,
    /// The candidate's place among its cell's eligible candidates in `mode`, the profiled one
    /// (1: fastest; its place in the other modes it stands for is not kept).
    pub rank: usize,
    /// Launched with programmatic dependent launch, as the corpus's decode rows were.
    pub programmatic: bool,
    /// The kernels the launch runs, in order, `;`-separated symbols (the candidate's kernel,
    /// then the ordered reduce for two-phase candidates).
    pub kernels: String,
    /// Whether the registry says the first kernel runs on the integer tensor cores.
    pub imma: bool,
}

impl ProfileRequest {
    pub fn kernel_symbols(&self) -> Vec<&str> {
        self.kernels.split(';').collect()
    }

    /// The modes the launch stands for (`modes` as written; [`read_requests`] checks it).
    pub fn stands_for(&self) -> Vec<Mode> {
        self.modes.split(';').filter_map(|m| m.parse().ok()).collect()
    }

    /// The key of every mode the launch stands for.
    pub fn keys(&self) -> Vec<ProfileKey> {
        self.stands_for().into_iter().map(|mode| ProfileKey { mode, ..self.key() }).collect()
    }
}

/// The ncu records `requests` must produce: one per kernel each launches.
pub fn kernel_records(requests: &[ProfileRequest]) -> usize {
    requests.iter().map(|r| r.kernel_symbols().len()).sum()
}

/// `modes` of a request: modes in order, `;`-separated.
fn modes_field(modes: &[Mode]) -> String {
    modes.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(";")
}

/// One ncu record of a request in one mode it stands for, in base units (`evidence.csv`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRow {
    pub request: usize,
    pub source_format: SourceFormat,
    pub codebook: Codebook,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub mode: Mode,
    /// The mode of the launch ncu profiled (another mode's row shares its record).
    pub profiled_mode: Mode,
    pub candidate: CandidateId,
    /// Batched rows: the M = 1 candidate whose bpp they inherit (empty for decode).
    pub m1_candidate: Option<CandidateId>,
    pub bpp: usize,
    /// The record's place among its request's kernels (0: the candidate's kernel).
    pub record: usize,
    pub kernel: String,
    pub registers: u32,
    pub shared_static_bytes: u64,
    pub shared_dynamic_bytes: u64,
    pub achieved_occupancy_pct: f64,
    /// DRAM bytes moved, % of the peak over the launch's elapsed time.
    pub dram_pct: f64,
    /// L2 sectors served, % of the peak over the launch's elapsed time.
    pub l2_pct: f64,
    /// Warp instructions loading from / storing to local memory (spills; each is one L1
    /// request).
    pub local_load_insts: u64,
    pub local_store_insts: u64,
    /// Global load warp instructions: `LDG` and `cp.async` (`LDGSTS`).
    pub global_load_insts: u64,
    /// Bytes those instructions asked for.
    pub global_load_bytes: u64,
    /// 32-byte sectors they fetched from L1/TEX.
    pub global_load_sectors: u64,
    /// The global loads' bytes over what the same warp instructions would move with every
    /// lane loading 128 bits (1: every load is a full-warp 128-bit load); empty without loads.
    pub ld128_share: Option<f64>,
    /// Bytes the global loads asked for per 32-byte sector fetched (32: no byte wasted).
    pub bytes_per_sector: Option<f64>,
    pub imma_insts: u64,
    /// ncu's own duration of the profiled launch: evidence only, never a timing.
    pub profiled_duration_ns: f64,
}

impl EvidenceRow {
    /// Whether this is the row of the mode ncu profiled: one such row per ncu record (the
    /// rows of the other modes it stands for repeat it).
    pub fn is_record(&self) -> bool {
        self.mode == self.profiled_mode
    }

    pub fn spill_insts(&self) -> u64 {
        self.local_load_insts + self.local_store_insts
    }
}

/// What binds `requests.csv` to the corpus it was drawn from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestManifest {
    pub schema: String,
    pub corpus_id: String,
    pub requests_sha256: String,
    pub requests: usize,
    /// Records ncu must write: one per kernel of every request.
    pub records: usize,
    /// Requests per chunk (one ncu process and file of `ncu/` per chunk and pass).
    pub chunk: usize,
    /// The metrics each pass's ncu process collects, by pass name.
    pub metrics: BTreeMap<String, Vec<String>>,
    /// What the records describe: the device and the kernels' source (the worker refuses
    /// another device or build, and a resume keeps no chunk of another).
    pub device: String,
    pub arch: String,
    pub kernel_source_digest: String,
    /// Which decode launches issue the L2 weight prefetch: the corpus's rule, so its kernels
    /// are profiled as they were timed. Absent in manifests written before the rule existed,
    /// whose builds issued it on every launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_prefetch: Option<L2Prefetch>,
}

impl RequestManifest {
    /// The L2 prefetch rule the worker launches the requests under.
    pub fn decode_l2_prefetch(&self) -> L2Prefetch {
        L2Prefetch::recorded(self.l2_prefetch)
    }

    /// The request ranges of the chunks, in order.
    pub fn chunks(&self) -> Vec<std::ops::Range<usize>> {
        (0..self.requests).step_by(self.chunk.max(1)).map(|a| a..(a + self.chunk.max(1)).min(self.requests)).collect()
    }
}

/// Where ncu's process of `pass` writes the chunk that starts at request `first`.
pub fn chunk_path(dir: &Path, first: usize, pass: Pass) -> PathBuf {
    dir.join(NCU_DIR).join(format!("{first:06}.{}.csv", pass.name()))
}

/// What binds the evidence to its requests, ncu's output and the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceManifest {
    pub schema: String,
    pub corpus_id: String,
    pub requests_sha256: String,
    /// sha256 of each ncu CSV, chunk by chunk and pass by pass ([`Pass::PROFILED`]).
    pub ncu_sha256: Vec<String>,
    pub evidence_sha256: String,
    /// Rows of `evidence.csv`: one per ncu record and mode its launch stands for.
    pub rows: usize,
}

/// The request manifest of `requests` for corpus `corpus_id`, with the bytes of `requests.csv`.
/// Where the requests are profiled: the corpus's device and the build's kernel sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub device: String,
    pub arch: String,
    pub kernel_source_digest: String,
    /// The corpus plan's L2 prefetch rule (`CollectionPlan::decode_l2_prefetch`).
    pub l2_prefetch: L2Prefetch,
}

pub fn request_manifest(
    dir: &Path,
    corpus_id: &str,
    requests: &[ProfileRequest],
    chunk: usize,
    target: &Target,
) -> Result<(RequestManifest, Vec<u8>), EvidenceError> {
    let bytes = crate::write::csv_bytes(&dir.join(REQUESTS), requests)?;
    let records = kernel_records(requests);
    let manifest = RequestManifest {
        schema: SCHEMA.into(),
        corpus_id: corpus_id.into(),
        requests_sha256: sha256_hex(&bytes),
        requests: requests.len(),
        records,
        chunk: chunk.max(1),
        metrics: Pass::PROFILED
            .iter()
            .map(|&p| (p.name().to_string(), ncu::metrics_of(p).map(|m| m.ncu.to_string()).collect()))
            .collect(),
        device: target.device.clone(),
        arch: target.arch.clone(),
        kernel_source_digest: target.kernel_source_digest.clone(),
        l2_prefetch: Some(target.l2_prefetch),
    };
    Ok((manifest, bytes))
}

/// Write `requests.csv` and its manifest into `dir`.
pub fn write_requests(
    dir: &Path,
    corpus_id: &str,
    requests: &[ProfileRequest],
    chunk: usize,
    target: &Target,
) -> Result<RequestManifest, EvidenceError> {
    let (manifest, bytes) = request_manifest(dir, corpus_id, requests, chunk, target)?;
    crate::write::write_bytes(&dir.join(REQUESTS), &bytes)?;
    write_json(&dir.join(REQUEST_MANIFEST), &manifest)?;
    Ok(manifest)
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), EvidenceError> {
    let text = serde_json::to_string_pretty(v).expect("a manifest serializes") + "\n";
    Ok(crate::write::write_bytes(path, text.as_bytes())?)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EvidenceError> {
    let text = std::fs::read_to_string(path).map_err(|e| file_err(path, e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| file_err(path, format!("not a manifest: {e}")))
}

fn read_requests_file(path: &Path) -> Result<Vec<ProfileRequest>, EvidenceError> {
    let mut out: Vec<ProfileRequest> = Vec::new();
    for (line, req) in crate::read::rows::<ProfileRequest>(path)? {
        let expected = out.len();
        if req.request != expected {
            let why = format!("request {} where {expected} was expected", req.request);
            return Err(crate::read::row_err(path, line, "request", why).into());
        }
        crate::read::check_candidate(path, line, req.candidate.as_str())?;
        let modes: Vec<&str> = req.modes.split(';').collect();
        let parsed: Vec<Mode> = modes.iter().filter_map(|m| m.parse().ok()).collect();
        let ordered = parsed.windows(2).all(|w| w[0] < w[1]);
        if parsed.len() != modes.len() || parsed.first() != Some(&req.mode) || !ordered {
            let why = format!("{:?}: modes in order, `;`-separated, the profiled mode {} first", req.modes, req.mode);
            return Err(crate::read::row_err(path, line, "modes", why).into());
        }
        out.push(req);
    }
    Ok(out)
}

/// The requests of `dir`, authenticated by their manifest, which must bind `corpus_id`.
pub fn read_requests(dir: &Path, corpus_id: &str) -> Result<(RequestManifest, Vec<ProfileRequest>), EvidenceError> {
    let mpath = dir.join(REQUEST_MANIFEST);
    let manifest: RequestManifest = read_json(&mpath)?;
    if manifest.schema != SCHEMA {
        return Err(file_err(&mpath, format!("schema {:?}, this build reads {SCHEMA:?}", manifest.schema)));
    }
    if manifest.corpus_id != corpus_id {
        return Err(file_err(
            &mpath,
            format!(
                "requests drawn from corpus {}, not from corpus {corpus_id}: profile this corpus again",
                manifest.corpus_id
            ),
        ));
    }
    let path = dir.join(REQUESTS);
    let bytes = std::fs::read(&path).map_err(|e| file_err(&path, e.to_string()))?;
    if sha256_hex(&bytes) != manifest.requests_sha256 {
        return Err(file_err(&path, "changed since its manifest was written (sha256 differs)"));
    }
    let requests = read_requests_file(&path)?;
    let records = kernel_records(&requests);
    if requests.len() != manifest.requests || records != manifest.records {
        return Err(file_err(&mpath, "request and record counts differ from requests.csv"));
    }
    Ok((manifest, requests))
}

/// Every request must name an eligible timing row of the corpus: evidence for a cell,
/// candidate or bpp the corpus never measured is evidence of something else.
pub fn check_requests_against(
    path: &Path,
    requests: &[ProfileRequest],
    rows: &[TimingRow],
) -> Result<(), EvidenceError> {
    let measured: BTreeSet<ProfileKey> = rows.iter().filter(|r| r.eligible).filter_map(ProfileKey::of_row).collect();
    for r in requests {
        if let Some(key) = r.keys().into_iter().find(|k| !measured.contains(k)) {
            return Err(file_err(path, format!("request {}: {key} is not an eligible row of the corpus", r.request)));
        }
        // what the launch runs and whether it uses the tensor cores are this registry's word,
        // not the word of the registry that wrote the requests
        let cand = vnni_kernels::registry::find(r.candidate.as_str())
            .ok_or_else(|| file_err(path, format!("request {}: {} is not in this registry", r.request, r.candidate)))?;
        let kernels = cand.launched_symbols(r.codebook, (r.k / 32).div_ceil(r.bpp.max(1))).join(";");
        if kernels != r.kernels || cand.family.tensor_cores() != r.imma {
            return Err(file_err(
                path,
                format!(
                    "request {} ({}): the registry now launches {kernels} (IMMA {}), the request says {} (IMMA {}): profile again",
                    r.request,
                    r.key(),
                    cand.family.tensor_cores(),
                    r.kernels,
                    r.imma
                ),
            ));
        }
    }
    Ok(())
}

/// Bind ncu's records to the requests in launch order: each request owns as many records as it
/// runs kernels, each named by its symbol. Metrics become evidence rows in base units, one per
/// record and mode the request stands for.
pub fn bind(
    ncu_path: &Path,
    requests: &[ProfileRequest],
    records: &[NcuRecord],
) -> Result<Vec<EvidenceRow>, EvidenceError> {
    let expected = kernel_records(requests);
    if records.len() != expected {
        return Err(file_err(
            ncu_path,
            format!("{} records for {} requests that launch {expected} kernels: a launch was not profiled or an extra one was", records.len(), requests.len()),
        ));
    }
    let mut out = Vec::with_capacity(records.len());
    let mut next = records.iter();
    for r in requests {
        for (i, symbol) in r.kernel_symbols().into_iter().enumerate() {
            let rec = next.next().expect("counted above");
            if !ncu::names_symbol(&rec.kernel, symbol) {
                return Err(file_err(
                    ncu_path,
                    format!(
                        "line {}: record {} is kernel {:?}, request {} ({}) launches {symbol} there",
                        rec.line,
                        rec.id,
                        rec.kernel,
                        r.request,
                        r.key()
                    ),
                ));
            }
            out.extend(r.stands_for().into_iter().map(|mode| EvidenceRow { mode, ..row(r, i, rec) }));
        }
    }
    Ok(out)
}

/// The evidence row of record `record` of request `r`, in the mode profiled.
fn row(r: &ProfileRequest, record: usize, rec: &NcuRecord) -> EvidenceRow {
    let v = |m: &str| rec.value(m);
    let count = |m: &str| v(m).round() as u64;
    let insts = count("smsp__sass_inst_executed_op_global_ld.sum") + count("smsp__sass_inst_executed_op_ldgsts.sum");
    let bytes =
        count("smsp__sass_data_bytes_mem_global_op_ld.sum") + count("smsp__sass_data_bytes_mem_global_op_ldgsts.sum");
    let sectors = count("smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ld.sum")
        + count("smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts.sum");
    EvidenceRow {
        request: r.request,
        source_format: r.source_format,
        codebook: r.codebook,
        m: r.m,
        n: r.n,
        k: r.k,
        mode: r.mode,
        profiled_mode: r.mode,
        candidate: r.candidate.clone(),
        m1_candidate: r.m1_candidate.clone(),
        bpp: r.bpp,
        record,
        kernel: rec.kernel.clone(),
        registers: count("launch__registers_per_thread") as u32,
        shared_static_bytes: count("launch__shared_mem_per_block_static"),
        shared_dynamic_bytes: count("launch__shared_mem_per_block_dynamic"),
        achieved_occupancy_pct: v("sm__warps_active.avg.pct_of_peak_sustained_active"),
        dram_pct: v("dram__bytes.sum.pct_of_peak_sustained_elapsed"),
        l2_pct: v("lts__t_sectors.sum.pct_of_peak_sustained_elapsed"),
        local_load_insts: count("smsp__sass_inst_executed_op_local_ld.sum"),
        local_store_insts: count("smsp__sass_inst_executed_op_local_st.sum"),
        global_load_insts: insts,
        global_load_bytes: bytes,
        global_load_sectors: sectors,
        ld128_share: (insts > 0).then(|| bytes as f64 / (insts as f64 * 32.0 * 16.0)),
        bytes_per_sector: (sectors > 0).then(|| bytes as f64 / sectors as f64),
        imma_insts: count("sm__inst_executed_pipe_tensor_op_imma.sum"),
        profiled_duration_ns: v("gpu__time_duration.sum"),
    }
}

/// One chunk of ncu output, bound to its requests.
pub struct Chunk {
    pub rows: Vec<EvidenceRow>,
    /// sha256 of each pass's ncu CSV, in [`Pass::PROFILED`] order.
    pub sha256: Vec<String>,
}

/// The records of one pass of a chunk and the sha256 of its file, or why the file does not
/// hold them (missing, cut, a record per launch missing or extra).
pub fn read_pass(
    dir: &Path,
    requests: &[ProfileRequest],
    range: std::ops::Range<usize>,
    pass: Pass,
) -> Result<(Vec<NcuRecord>, String), EvidenceError> {
    let path = chunk_path(dir, range.start, pass);
    let text =
        std::fs::read_to_string(&path).map_err(|e| file_err(&path, format!("{e} (this chunk was not profiled)")))?;
    let records = ncu::parse(&path, &text, pass)?;
    let expected = kernel_records(&requests[range.clone()]);
    if records.len() != expected {
        return Err(file_err(
            &path,
            format!(
                "{} records for requests {}..{} that launch {expected} kernels: a launch was not profiled or an extra one was",
                records.len(),
                range.start,
                range.end
            ),
        ));
    }
    Ok((records, sha256_hex(text.as_bytes())))
}

/// One chunk's evidence rows: every pass's records joined in launch order and bound to the
/// requests, or why the files do not hold them.
pub fn read_chunk(
    dir: &Path,
    requests: &[ProfileRequest],
    range: std::ops::Range<usize>,
) -> Result<Chunk, EvidenceError> {
    let (mut parts, mut sha256) = (Vec::new(), Vec::new());
    for pass in Pass::PROFILED {
        let (records, digest) = read_pass(dir, requests, range.clone(), pass)?;
        parts.push((chunk_path(dir, range.start, pass), records));
        sha256.push(digest);
    }
    let path = parts[0].0.clone();
    let records = ncu::join(parts)?;
    Ok(Chunk { rows: bind(&path, &requests[range], &records)?, sha256 })
}

/// Every chunk's rows in request order, and the chunks' digests.
fn read_all_chunks(
    dir: &Path,
    manifest: &RequestManifest,
    requests: &[ProfileRequest],
) -> Result<(Vec<EvidenceRow>, Vec<String>), EvidenceError> {
    let (mut rows, mut digests) = (Vec::new(), Vec::new());
    for range in manifest.chunks() {
        let chunk = read_chunk(dir, requests, range)?;
        rows.extend(chunk.rows);
        digests.extend(chunk.sha256);
    }
    Ok((rows, digests))
}

/// Parse every chunk of `dir/ncu/`, bind it to the requests (authenticated for `corpus_id`),
/// and write `evidence.csv` and its manifest.
pub fn write_evidence(dir: &Path, corpus_id: &str) -> Result<Vec<EvidenceRow>, EvidenceError> {
    let (req_manifest, requests) = read_requests(dir, corpus_id)?;
    let (rows, ncu_sha256) = read_all_chunks(dir, &req_manifest, &requests)?;
    let epath = dir.join(EVIDENCE);
    let bytes = crate::write::csv_bytes(&epath, &rows)?;
    crate::write::write_bytes(&epath, &bytes)?;
    let manifest = EvidenceManifest {
        schema: SCHEMA.into(),
        corpus_id: corpus_id.into(),
        requests_sha256: req_manifest.requests_sha256,
        ncu_sha256,
        evidence_sha256: sha256_hex(&bytes),
        rows: rows.len(),
    };
    write_json(&dir.join(EVIDENCE_MANIFEST), &manifest)?;
    Ok(rows)
}

/// Authenticate the evidence of `dir` for corpus `corpus_id`: both manifests bind that corpus
/// and the same requests, every file matches its digest, and `evidence.csv` is exactly what
/// ncu's output derives to (so no row was edited and no unit was read differently).
pub fn verify(dir: &Path, corpus_id: &str) -> Result<(Vec<ProfileRequest>, Vec<EvidenceRow>), EvidenceError> {
    let (req_manifest, requests) = read_requests(dir, corpus_id)?;
    let mpath = dir.join(EVIDENCE_MANIFEST);
    let manifest: EvidenceManifest = read_json(&mpath)?;
    if manifest.schema != SCHEMA || manifest.corpus_id != corpus_id {
        return Err(file_err(
            &mpath,
            format!(
                "schema {:?} for corpus {}, expected {SCHEMA:?} for corpus {corpus_id}",
                manifest.schema, manifest.corpus_id
            ),
        ));
    }
    if manifest.requests_sha256 != req_manifest.requests_sha256 {
        return Err(file_err(&mpath, "bound to other requests than requests.csv"));
    }
    // the files' digests first: an edited file is named as edited, whatever it now fails
    let mut ncu_sha256 = Vec::new();
    for range in req_manifest.chunks() {
        for pass in Pass::PROFILED {
            let path = chunk_path(dir, range.start, pass);
            let bytes =
                std::fs::read(&path).map_err(|e| file_err(&path, format!("{e} (this chunk was not profiled)")))?;
            ncu_sha256.push(sha256_hex(&bytes));
        }
    }
    if ncu_sha256 != manifest.ncu_sha256 {
        return Err(file_err(&dir.join(NCU_DIR), "changed since the evidence was derived (sha256 differs)"));
    }
    let (rows, _) = read_all_chunks(dir, &req_manifest, &requests)?;
    let epath = dir.join(EVIDENCE);
    let bytes = std::fs::read(&epath).map_err(|e| file_err(&epath, e.to_string()))?;
    if sha256_hex(&bytes) != manifest.evidence_sha256 {
        return Err(file_err(&epath, "changed since its manifest was written (sha256 differs)"));
    }
    if crate::write::csv_bytes(&epath, &rows)? != bytes {
        return Err(file_err(&epath, "is not what ncu's output derives to: derive it again (profile --reparse)"));
    }
    Ok((requests, rows))
}

/// The evidence rows of each profiled key.
pub fn by_key(rows: &[EvidenceRow]) -> BTreeMap<ProfileKey, Vec<&EvidenceRow>> {
    let mut out: BTreeMap<ProfileKey, Vec<&EvidenceRow>> = BTreeMap::new();
    for r in rows {
        out.entry(r.key()).or_default().push(r);
    }
    out
}

/// What the registry says a request's records must show, checked on the evidence: no
/// local-memory (spill) instruction anywhere, and integer tensor-core instructions in the first record exactly where
/// the registry says the candidate uses them. Returns one line per violation.
pub fn check_claims(requests: &[ProfileRequest], rows: &[EvidenceRow]) -> Vec<String> {
    let by_request: BTreeMap<usize, &ProfileRequest> = requests.iter().map(|r| (r.request, r)).collect();
    let mut out = Vec::new();
    for row in rows.iter().filter(|r| r.is_record()) {
        if row.spill_insts() > 0 {
            out.push(format!(
                "{} record {}: {} local-memory instructions (a spill)",
                row.key(),
                row.record,
                row.spill_insts()
            ));
        }
        if row.record == 0 {
            let imma = by_request.get(&row.request).is_some_and(|r| r.imma);
            if imma && row.imma_insts == 0 {
                out.push(format!(
                    "{}: the registry says IMMA, ncu counted no integer tensor-core instruction",
                    row.key()
                ));
            }
            if !imma && row.imma_insts > 0 {
                out.push(format!(
                    "{}: {} integer tensor-core instructions in a kernel the registry says uses none",
                    row.key(),
                    row.imma_insts
                ));
            }
        }
    }
    out
}

/// Which launches a profiling pass asks for.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The fastest `top` eligible candidates of every (cell, mode); None: every one.
    pub top: Option<usize>,
    /// Keys asked for whatever their rank (e.g. a policy's picks).
    pub also: BTreeSet<ProfileKey>,
    /// Decode rows were timed with programmatic dependent launch (the corpus plan says so).
    pub programmatic: bool,
}

/// The requests for a corpus's CUDA timing rows: per (cell, mode) the eligible candidates
/// ranked by median (ties by id), the first `top` of them plus every key in `also`, ordered
/// by cell (so a pass builds each weight matrix once), then mode and rank. A candidate asked
/// for in both modes of a cell is one request, launched in the first of them, that stands for
/// both (the same kernels with the same arguments: see [`ProfileRequest::modes`]).
pub fn plan_requests(
    path: &Path,
    rows: &[TimingRow],
    selection: &Selection,
) -> Result<Vec<ProfileRequest>, EvidenceError> {
    if let Some(r) = rows.iter().find(|r| r.source_format.is_some() && r.backend != vnni_kernels::Backend::Cuda) {
        return Err(file_err(path, format!("a {} row: profiler evidence is for CUDA corpora", r.backend)));
    }
    let mut out: Vec<ProfileRequest> = Vec::new();
    // a launch's key with its mode set to one value -> its request
    let mut launched: BTreeMap<ProfileKey, usize> = BTreeMap::new();
    for ranked in ranked_cells(rows) {
        for (i, r) in ranked.iter().enumerate() {
            let key = ProfileKey::of_row(r).expect("rows with a format have a codebook");
            if selection.top.is_some_and(|t| i >= t) && !selection.also.contains(&key) {
                continue;
            }
            // ranked_cells orders a cell's modes one after the other, so every mode this
            // launch was asked for in meets the first request of it
            let launch = ProfileKey { mode: Mode::Eager, ..key.clone() };
            if let Some(&at) = launched.get(&launch) {
                let req = &mut out[at];
                let mut modes = req.stands_for();
                if modes.contains(&r.mode) {
                    return Err(file_err(path, format!("{key} is measured twice")));
                }
                modes.push(r.mode);
                req.modes = modes_field(&modes);
                continue;
            }
            let cand = vnni_kernels::registry::find(r.candidate.as_str())
                .ok_or_else(|| file_err(path, format!("{} is not in this checkout's registry", r.candidate)))?;
            let kb = (r.k / 32).div_ceil(r.bpp.max(1));
            launched.insert(launch, out.len());
            out.push(ProfileRequest {
                request: out.len(),
                source_format: key.source_format,
                codebook: key.codebook,
                m: r.m,
                n: r.n,
                k: r.k,
                mode: r.mode,
                modes: modes_field(&[r.mode]),
                candidate: r.candidate.clone(),
                m1_candidate: r.m1_candidate.clone(),
                bpp: r.bpp,
                rank: i + 1,
                programmatic: selection.programmatic && r.m == 1 && cand.family.programmatic(),
                kernels: cand.launched_symbols(key.codebook, kb).join(";"),
                imma: cand.family.tensor_cores(),
            });
        }
    }
    Ok(out)
}

/// The keys an install needs evidence of: in every (cell, mode) of the corpus's eligible CUDA
/// rows, the row of the installed pick (`pick` names it per row's cell) and the fastest other
/// eligible row (its runner-up). A cell whose pick was not measured there needs none (the
/// policy's gates judge that, not the evidence).
pub fn installed_keys<E>(
    rows: &[TimingRow],
    mut pick: impl FnMut(&TimingRow) -> Result<String, E>,
) -> Result<BTreeSet<ProfileKey>, E> {
    let mut out = BTreeSet::new();
    for ranked in ranked_cells(rows) {
        let id = pick(ranked[0])?;
        let Some(installed) = ranked.iter().find(|r| r.candidate.as_str() == id) else { continue };
        out.extend(ProfileKey::of_row(installed));
        if let Some(runner_up) = ranked.iter().find(|r| r.candidate.as_str() != id) {
            out.extend(ProfileKey::of_row(runner_up));
        }
    }
    Ok(out)
}

/// The eligible CUDA rows of each (cell, mode), fastest first (ties by candidate id), cells in
/// key order.
fn ranked_cells(rows: &[TimingRow]) -> Vec<Vec<&TimingRow>> {
    type Cell = (SourceFormat, usize, usize, usize, Option<CandidateId>, Mode);
    let mut cells: BTreeMap<Cell, Vec<&TimingRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.eligible && r.backend == vnni_kernels::Backend::Cuda) {
        if let Some(format) = r.source_format {
            cells.entry((format, r.n, r.k, r.m, r.m1_candidate.clone(), r.mode)).or_default().push(r);
        }
    }
    let mut out: Vec<_> = cells.into_values().collect();
    for ranked in &mut out {
        ranked.sort_by(|a, b| a.median_us.total_cmp(&b.median_us).then_with(|| a.candidate.cmp(&b.candidate)));
    }
    out
}

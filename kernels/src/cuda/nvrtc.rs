//! NVRTC compilation to cubin for a real architecture, with the ptxas verbose log, and an
//! on-disk cubin cache keyed by (source digest, options, NVRTC version, arch).

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{result, sys};

use super::CudaError;
use crate::digest::Sha256Hex;

/// The fixed options: no FMA contraction is part of the arithmetic contract.
pub fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--fmad=false".into(),
        "--std=c++17".into(),
        "--ptxas-options=--verbose".into(),
    ]
}

/// Fail with a clear message (not a panic) when libnvrtc cannot be loaded.
pub fn ensure_available() -> Result<(), CudaError> {
    // SAFETY: only tries to dlopen the library.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(CudaError::MissingLibrary {
            library: "libnvrtc (NVRTC)",
            fix: "install the CUDA toolkit or `pip install nvidia-cuda-nvrtc==13.0.88` and add the \
                  directory holding libnvrtc.so.13 to LD_LIBRARY_PATH",
        })
    }
}

/// NVRTC's (major, minor) version.
pub fn version() -> Result<(i32, i32), CudaError> {
    ensure_available()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| CudaError::Nvrtc { module: "version".into(), log: format!("{e:?}") })?;
    Ok((major, minor))
}

/// A compiled module image and what the compiler said.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    pub log: String,
    pub from_cache: bool,
}

fn cache_key(source: &str, arch: &str, nvrtc: (i32, i32)) -> String {
    // The raw source digest first (not its hex), then the options, then the compiler.
    let mut source_hash = Sha256Hex::new();
    source_hash.update(source.as_bytes());
    let mut h = Sha256Hex::new();
    h.update(&source_hash.finish_raw());
    for o in options(arch) {
        h.update_parts(&[o.as_bytes()]);
    }
    h.update(format!("nvrtc {}.{} {arch}", nvrtc.0, nvrtc.1).as_bytes());
    h.finish()
}

fn to_string(chars: Vec<c_char>) -> String {
    let bytes: Vec<u8> = chars.into_iter().take_while(|&c| c != 0).map(|c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether a compile log carries ptxas's per-kernel resource lines (`--ptxas-options=--verbose`).
fn has_resource_lines(log: &str) -> bool {
    log.contains("Compiling entry function '")
}

/// Compile `source` (module `name`) to a cubin for `arch` (e.g. `sm_90`), using `cache`
/// when given. A compile error returns the whole log.
pub fn compile(source: &str, name: &str, arch: &str, cache: Option<&Path>) -> Result<Compiled, CudaError> {
    let nvrtc = version()?;
    let key = cache_key(source, arch, nvrtc);
    let cached: Option<(PathBuf, PathBuf)> =
        cache.map(|dir| (dir.join(format!("{key}.cubin")), dir.join(format!("{key}.log"))));
    if let Some((cubin, log)) = &cached {
        if let (Ok(cubin), Ok(log)) = (std::fs::read(cubin), std::fs::read_to_string(log)) {
            // A log without resource lines (written before NVRTC's own cache was turned off)
            // cannot preflight anything: compile again.
            if has_resource_lines(&log) {
                return Ok(Compiled { cubin, log, from_cache: true });
            }
        }
    }
    let src = CString::new(source).expect("CUDA source has no NUL");
    let cname = CString::new(format!("{name}.cu")).expect("module name has no NUL");
    let prog = result::create_program(&src, Some(&cname))
        .map_err(|e| CudaError::Nvrtc { module: name.into(), log: format!("{e:?}") })?;
    // SAFETY: prog is a live program; it is destroyed below on every path.
    let out = unsafe {
        let status = result::compile_program(prog, &options(arch));
        let log = result::get_program_log(prog).map(to_string).unwrap_or_default();
        let res = match status {
            Err(_) => Err(CudaError::Nvrtc { module: name.into(), log: log.clone() }),
            Ok(()) => {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .and_then(|_| {
                        let mut buf = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char).result().map(|_| buf)
                    })
                    .map(|cubin| Compiled { cubin, log, from_cache: false })
                    .map_err(|e| CudaError::Nvrtc { module: name.into(), log: format!("nvrtcGetCUBIN: {e:?}") })
            }
        };
        let _ = result::destroy_program(prog);
        res
    }?;
    if !has_resource_lines(&out.log) {
        return Err(CudaError::Nvrtc {
            module: name.into(),
            log: format!(
                "the compile log has no ptxas resource lines, so no kernel can be preflighted: NVRTC's own \
                 compilation cache (CUDA 12.9+) answers without running ptxas unless CUDA_CACHE_DISABLE=1 \
                 (vnni-dispatch sets it at start; a library caller must set it before the first compile)\n{}",
                out.log
            ),
        });
    }
    if let Some((cubin, log)) = &cached {
        write_atomic(cubin, &out.cubin)?;
        write_atomic(log, out.log.as_bytes())?;
    }
    Ok(out)
}

/// Cache entries are replaced atomically, so a crash never leaves a torn one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CudaError> {
    crate::atomic::write_bytes(path, bytes)
        .map_err(|e| CudaError::Io { path: path.to_path_buf(), message: e.to_string() })
}

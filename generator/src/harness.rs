//! The two validation harnesses: the .inc compiled with the system C++ compiler, the Rust
//! module compiled with rustc, each answering a query file in bulk (one process each).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{io, GenerateError, Result};
use crate::render::{Rendered, HEADER_FILE, INC_FILE};

const CPP_SOURCE: &str = include_str!("../harness/harness.cpp");
const RUST_SOURCE: &str = include_str!("../harness/harness.rs");

/// The warnings-as-errors flags the .inc must compile under (stricter than -Wall -Wextra:
/// an implicit narrowing or sign change in the tables is an error too).
pub const CXX_FLAGS: [&str; 9] =
    ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O2", "-pedantic", "-Wconversion", "-Wsign-conversion", "-Wshadow"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Cpp,
    Rust,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Cpp => "C++",
            Language::Rust => "Rust",
        }
    }
}

/// A compiled harness.
#[derive(Debug, Clone)]
pub struct Harness {
    pub language: Language,
    /// The compiler that built it (`g++`, `clang++`, `rustc`, or `$CXX` / `$RUSTC`).
    pub compiler: String,
    pub binary: PathBuf,
}

/// `$CXX`, else the first of g++ and clang++ that runs: the compiler the `.inc` is validated with.
pub fn cxx() -> Result<String> {
    if let Some(c) = std::env::var_os("CXX").filter(|c| !c.is_empty()) {
        return Ok(c.to_string_lossy().into_owned());
    }
    let mut last = None;
    for c in ["g++", "clang++"] {
        match Command::new(c).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
            Ok(_) => return Ok(c.into()),
            Err(e) => last = Some(e),
        }
    }
    Err(GenerateError::ToolMissing {
        tool: "a C++17 compiler (g++ or clang++)".into(),
        fix: "install g++ (apt-get install g++) or set CXX".into(),
        source: last.expect("two compilers were tried"),
    })
}

fn rustc() -> String {
    std::env::var("RUSTC").ok().filter(|r| !r.is_empty()).unwrap_or_else(|| "rustc".into())
}

/// Why the Rust module could not be validated here (`$RUSTC` or `rustc` does not run), if so.
pub fn rustc_missing() -> Option<String> {
    let r = rustc();
    match Command::new(&r).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(_) => None,
        Err(e) => Some(format!("{r} does not run ({e})")),
    }
}

/// Run a compiler; a missing one is `ToolMissing`, a failed compile names the file.
fn compile(compiler: &str, args: &[&str], file: &Path, dir: &Path, fix: &str) -> Result<()> {
    let out = Command::new(compiler).args(args).current_dir(dir).output().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            GenerateError::ToolMissing { tool: compiler.into(), fix: fix.into(), source }
        } else {
            GenerateError::Io { path: compiler.into(), source }
        }
    })?;
    if !out.status.success() {
        return Err(GenerateError::Compile {
            tool: compiler.into(),
            file: dir.join(file),
            dir: dir.into(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// Write the rendered files into `dir` (the harness sources include them from there).
pub fn write_sources(rendered: &Rendered, dir: &Path) -> Result<()> {
    for (name, text) in rendered.files() {
        std::fs::write(dir.join(name), text).map_err(io(dir.join(name)))?;
    }
    std::fs::write(dir.join("harness.cpp"), CPP_SOURCE).map_err(io(dir.join("harness.cpp")))?;
    std::fs::write(dir.join("harness.rs"), RUST_SOURCE).map_err(io(dir.join("harness.rs")))?;
    // The header and the .inc together: the declarations must match the definitions.
    let both = format!("#include \"{HEADER_FILE}\"\n#include \"{INC_FILE}\"\n");
    std::fs::write(dir.join("header_and_inc.cpp"), both).map_err(io(dir.join("header_and_inc.cpp")))
}

/// Compile the C++ harness (and check the header against the .inc) in `dir`.
pub fn build_cpp(dir: &Path) -> Result<Harness> {
    let compiler = cxx()?;
    let fix = "install g++ (apt-get install g++) or set CXX";
    let mut args: Vec<&str> = CXX_FLAGS.to_vec();
    args.extend(["-fsyntax-only", "header_and_inc.cpp"]);
    compile(&compiler, &args, Path::new("header_and_inc.cpp"), dir, fix)?;
    let mut args: Vec<&str> = CXX_FLAGS.to_vec();
    args.extend(["-o", "harness_cpp", "harness.cpp"]);
    compile(&compiler, &args, Path::new(INC_FILE), dir, fix)?;
    Ok(Harness { language: Language::Cpp, compiler, binary: dir.join("harness_cpp") })
}

/// Compile the Rust harness in `dir`; warnings are errors here too.
pub fn build_rust(dir: &Path) -> Result<Harness> {
    let compiler = rustc();
    let args = ["-O", "--edition", "2021", "-D", "warnings", "-o", "harness_rs", "harness.rs"];
    compile(&compiler, &args, Path::new(crate::render::RUST_FILE), dir, "install Rust (rustup) or set RUSTC")?;
    Ok(Harness { language: Language::Rust, compiler, binary: dir.join("harness_rs") })
}

impl Harness {
    /// Answer `queries`, writing the harness's output to `answers`.
    pub fn run(&self, queries: &Path, answers: &Path, dir: &Path) -> Result<()> {
        let out = std::fs::File::create(answers).map_err(io(answers))?;
        let result = Command::new(&self.binary)
            .arg(queries)
            .stdout(out)
            .stderr(Stdio::piped())
            .output()
            .map_err(io(&self.binary))?;
        if !result.status.success() {
            return Err(GenerateError::Harness {
                harness: self.language.name().into(),
                dir: dir.into(),
                message: format!(
                    "{} exited with {}: {}",
                    self.binary.display(),
                    result.status,
                    String::from_utf8_lossy(&result.stderr)
                ),
            });
        }
        Ok(())
    }
}

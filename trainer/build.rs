//! Records the compiler that built the binary, for the provenance of every corpus it collects.
fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "rustc unknown".into());
    println!("cargo:rustc-env=VNNI_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
}

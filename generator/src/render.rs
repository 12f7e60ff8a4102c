//! Rendering: policy -> (.inc, header, Rust module), bytes depending only on the policy.

use vnni_policy::Policy;

use crate::context::Context;
use crate::error::{GenerateError, Result};
use crate::templates::environment;

/// File names of the three outputs, as written by `--out` and as the harnesses include them.
pub const INC_FILE: &str = "vnni_dispatch.inc";
pub const HEADER_FILE: &str = "vnni_dispatch.h";
pub const RUST_FILE: &str = "vnni_dispatch.rs";

/// The generated sources of one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Self-contained C++17: types, tables, trees, resolvers, entry points.
    pub inc: String,
    /// The types and entry-point declarations alone.
    pub header: String,
    /// A Rust module with the same tables and logic.
    pub rust: String,
    /// sha256 of the policy's canonical bytes, as the provenance header records it.
    pub policy_digest: String,
}

impl Rendered {
    /// (file name, text) of each output.
    pub fn files(&self) -> [(&'static str, &str); 3] {
        [(INC_FILE, &self.inc), (HEADER_FILE, &self.header), (RUST_FILE, &self.rust)]
    }
}

/// Render a policy; it must pass `check()` (checked here too).
pub fn render(policy: &Policy) -> Result<Rendered> {
    policy.check()?;
    let ctx = Context::new(policy)?;
    let env = environment();
    let one = |name: &str| -> Result<String> {
        let template = env.get_template(name).map_err(|e| template_error(name, &e))?;
        template.render(minijinja::Value::from(minijinja::value::Serde(&ctx))).map_err(|e| template_error(name, &e))
    };
    Ok(Rendered {
        inc: one("dispatch.inc.jinja")?,
        header: one("dispatch.h.jinja")?,
        rust: one("dispatch.rs.jinja")?,
        policy_digest: ctx.provenance.policy_digest.clone(),
    })
}

fn template_error(name: &str, e: &minijinja::Error) -> GenerateError {
    // The alternate form carries the template line and the chain of causes.
    GenerateError::Template { template: name.into(), message: format!("{e:#}") }
}

//! Helpers of the generator's tests.

use std::path::Path;

use vnni_generator::{GenerateError, InventoryPoints, Validated};
use vnni_kernels::registry::Backend;
use vnni_policy::Policy;

pub fn example(backend: Backend) -> Policy {
    vnni_policy::example::example_policy(backend)
}

/// Every point of the repository's inventory (profile `all`).
pub fn inventory_points() -> InventoryPoints {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/inventory");
    let inv = vnni_corpus::inventory::Inventory::load(&dir).expect("the repository inventory loads");
    InventoryPoints::from_plan(&inv.resolve("all").expect("profile all resolves"))
}

/// `Some(result)` unless the error is a missing compiler, which fails under CI and is
/// reported as skipped elsewhere.
pub fn unless_tool_missing<T>(r: Result<T, GenerateError>) -> Option<Result<T, GenerateError>> {
    match r {
        Err(GenerateError::ToolMissing { tool, fix, .. }) => {
            vnni_tests::missing_tool(&tool, &fix);
            None
        }
        other => Some(other),
    }
}

/// The validation must pass (or the compiler is missing outside CI).
pub fn expect_valid<'r>(r: Result<Validated<'r>, GenerateError>) -> Option<Validated<'r>> {
    unless_tool_missing(r).map(|r| r.unwrap_or_else(|e| panic!("validation failed: {e}")))
}

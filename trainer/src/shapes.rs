//! `NxK` shape lists on the command line.

use anyhow::{bail, Context, Result};

pub fn parse_shapes(text: &str) -> Result<Vec<(usize, usize)>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (n, k) = s.trim().split_once('x').with_context(|| format!("shape {s:?} is not NxK"))?;
            let n: usize = n.parse().with_context(|| format!("shape {s:?}: bad N"))?;
            let k: usize = k.parse().with_context(|| format!("shape {s:?}: bad K"))?;
            if n == 0 || k == 0 || k % 32 != 0 {
                bail!("shape {s:?}: N and K must be positive and K a multiple of 32");
            }
            Ok((n, k))
        })
        .collect()
}

//! `NxK` shape lists on the command line (`151936x4096,4096x4096`), bounded like the
//! inventory's shapes.

use std::fmt;
use std::str::FromStr;

use crate::error::{invalid, MeasureError, Result};

/// The largest N or K a command accepts: the inventory's bound (2^31 - 1, the int32 range
/// of the generated tables).
pub const MAX_DIM: usize = i32::MAX as usize;

/// The largest M a command accepts (the prefill surface's largest bucket is 4096).
pub const MAX_M: usize = 1 << 16;

pub fn parse_shapes(text: &str) -> Result<Vec<(usize, usize)>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let bad = |why: &str| MeasureError::Invalid(format!("shape {s:?}: {why}"));
            let (n, k) = s.trim().split_once('x').ok_or_else(|| bad("not NxK"))?;
            let n: usize = n.parse().map_err(|_| bad("bad N"))?;
            let k: usize = k.parse().map_err(|_| bad("bad K"))?;
            if n == 0 || k == 0 || k % 32 != 0 {
                invalid!("shape {s:?}: N and K must be positive and K a multiple of 32");
            }
            if n > MAX_DIM || k > MAX_DIM {
                invalid!("shape {s:?}: N and K must be at most {MAX_DIM}");
            }
            Ok((n, k))
        })
        .collect()
}

/// A parsed shape list (a command-line value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shapes(pub Vec<(usize, usize)>);

impl FromStr for Shapes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_shapes(s).map(Shapes).map_err(|e| e.to_string())
    }
}

impl fmt::Display for Shapes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.0.iter().map(|(n, k)| format!("{n}x{k}")).collect();
        f.write_str(&text.join(","))
    }
}

/// A list of row counts (`2,4,8`; empty: none), each 1 to [`MAX_M`] (a command-line value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MValues(pub Vec<usize>);

impl FromStr for MValues {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| match t.parse::<usize>() {
                Ok(m) if (1..=MAX_M).contains(&m) => Ok(m),
                _ => Err(format!("M = {t:?}: row counts are 1 to {MAX_M}")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(MValues)
    }
}

impl fmt::Display for MValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.0.iter().map(|m| m.to_string()).collect();
        f.write_str(&text.join(","))
    }
}

/// The row counts a dense-M bench measures up to `max`: every M from 1 to 64, every multiple
/// of 16 to 512, then powers of two (issue 24's grid; `max` itself when it falls between).
pub fn dense_m_grid(max: usize) -> Vec<usize> {
    let mut grid: Vec<usize> = (1..=64).chain((80..=512).step_by(16)).collect();
    let mut p = 1024;
    while p <= max.min(MAX_M) {
        grid.push(p);
        p *= 2;
    }
    grid.retain(|&m| m <= max);
    if (1..=MAX_M).contains(&max) && grid.last() != Some(&max) {
        grid.push(max);
    }
    grid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_print_and_are_bounded() {
        let s: Shapes = "151936x4096, 64x32".parse().unwrap();
        assert_eq!(s.0, vec![(151_936, 4096), (64, 32)]);
        assert_eq!(s.to_string(), "151936x4096,64x32");
        for bad in ["4096", "0x32", "64x33", "99999999999x4096", "ax32"] {
            assert!(bad.parse::<Shapes>().is_err(), "{bad}");
        }
        assert_eq!("".parse::<MValues>().unwrap(), MValues(vec![]));
        assert_eq!("2, 31".parse::<MValues>().unwrap().to_string(), "2,31");
        for bad in ["0", "99999999", "x"] {
            assert!(bad.parse::<MValues>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_dense_grid_is_every_m_then_sixteens_then_powers_of_two() {
        let g = dense_m_grid(4096);
        assert_eq!(g.len(), 64 + 28 + 3);
        assert_eq!(&g[..3], &[1, 2, 3]);
        assert_eq!(&g[62..67], &[63, 64, 80, 96, 112]);
        assert_eq!(&g[g.len() - 4..], &[512, 1024, 2048, 4096]);
        assert!(g.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(dense_m_grid(40).last(), Some(&40));
        assert_eq!(dense_m_grid(100), [(1..=64).collect::<Vec<_>>(), vec![80, 96, 100]].concat());
        assert_eq!(dense_m_grid(1), vec![1]);
    }
}

//! The typed vocabulary every crate, file and command shares: where a candidate runs
//! ([`Backend`]), which batch sizes it serves ([`Surface`]), how it is timed ([`Mode`]) and
//! what it is called ([`CandidateId`]). Each word has one spelling: the text in files,
//! flags and ids is exactly the `name()` here (serde, `FromStr`, `Display` and, with the
//! `clap` feature, `clap::ValueEnum` all use it), and an unknown word is an error that
//! lists the known ones.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A word that is not in one vocabulary: what was given and the words that exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?} (valid: {valid})")]
pub struct UnknownWord {
    pub what: &'static str,
    pub given: String,
    pub valid: String,
}

/// A closed vocabulary: every variant and its one spelling.
pub trait Vocabulary: Copy + Sized + 'static {
    /// What the words name, for errors ("backend", "mode").
    const WHAT: &'static str;
    const ALL: &'static [Self];
    fn name(self) -> &'static str;

    /// Parse one word (surrounding white space ignored); the error lists the valid words.
    fn parse_word(s: &str) -> Result<Self, UnknownWord> {
        let t = s.trim();
        Self::ALL.iter().copied().find(|v| v.name() == t).ok_or_else(|| UnknownWord {
            what: Self::WHAT,
            given: s.to_string(),
            valid: Self::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(", "),
        })
    }
}

/// `Display`, `FromStr`, serde as the word, and `clap::ValueEnum` (feature `clap`) for a
/// [`Vocabulary`] type.
#[macro_export]
macro_rules! vocabulary_impls {
    ($t:ty) => {
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::vocab::Vocabulary::name(*self))
            }
        }
        impl ::std::str::FromStr for $t {
            type Err = $crate::vocab::UnknownWord;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$t as $crate::vocab::Vocabulary>::parse_word(s)
            }
        }
        impl ::serde::Serialize for $t {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($crate::vocab::Vocabulary::name(*self))
            }
        }
        impl<'de> ::serde::Deserialize<'de> for $t {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                <$t as $crate::vocab::Vocabulary>::parse_word(&s).map_err(::serde::de::Error::custom)
            }
        }
        #[cfg(feature = "clap")]
        impl ::clap::ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                <$t as $crate::vocab::Vocabulary>::ALL
            }
            fn to_possible_value(&self) -> Option<::clap::builder::PossibleValue> {
                Some(::clap::builder::PossibleValue::new($crate::vocab::Vocabulary::name(*self)))
            }
        }
    };
}

/// Where a candidate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    /// CUDA kernels compiled by NVRTC (`kernels/cuda/`).
    Cuda,
    /// rayon kernels on the host (`cpu.rs`), the same contract.
    Cpu,
}

impl Vocabulary for Backend {
    const WHAT: &'static str = "backend";
    const ALL: &'static [Self] = &[Backend::Cuda, Backend::Cpu];
    fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }
}

impl Backend {
    pub fn name(self) -> &'static str {
        Vocabulary::name(self)
    }
}
vocabulary_impls!(Backend);

/// The backend a command should open: one of [`Backend`], or `auto` (CUDA when a GPU
/// opens, else the CPU with a notice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BackendChoice {
    Cuda,
    Cpu,
    Auto,
}

impl Vocabulary for BackendChoice {
    const WHAT: &'static str = "backend";
    const ALL: &'static [Self] = &[BackendChoice::Cuda, BackendChoice::Cpu, BackendChoice::Auto];
    fn name(self) -> &'static str {
        match self {
            BackendChoice::Cuda => "cuda",
            BackendChoice::Cpu => "cpu",
            BackendChoice::Auto => "auto",
        }
    }
}
vocabulary_impls!(BackendChoice);

impl From<Backend> for BackendChoice {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Cuda => BackendChoice::Cuda,
            Backend::Cpu => BackendChoice::Cpu,
        }
    }
}

/// Which batch sizes a candidate serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Surface {
    /// M = 1.
    Decode,
    /// M = 2..16 and 31 (speculative-decoding verifier rows); bpp inherited from M = 1.
    Grouped,
    /// M >= 32 (prompt processing): IMMA GEMM tiles; bpp inherited from M = 1.
    Prefill,
}

impl Vocabulary for Surface {
    const WHAT: &'static str = "surface";
    const ALL: &'static [Self] = &[Surface::Decode, Surface::Grouped, Surface::Prefill];
    fn name(self) -> &'static str {
        match self {
            Surface::Decode => "decode",
            Surface::Grouped => "grouped",
            Surface::Prefill => "prefill",
        }
    }
}
vocabulary_impls!(Surface);

/// The smallest M served by the prefill surface.
pub const PREFILL_MIN_M: usize = 32;

impl Surface {
    pub fn name(self) -> &'static str {
        Vocabulary::name(self)
    }

    /// The surface that serves M activation rows (M >= 1).
    pub fn of_m(m: usize) -> Surface {
        match m {
            0 | 1 => Surface::Decode,
            m if m < PREFILL_MIN_M => Surface::Grouped,
            _ => Surface::Prefill,
        }
    }
}

/// How a sample is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Plain launches.
    Eager,
    /// The launches of one sample captured once into a CUDA graph and replayed.
    Graph,
}

impl Vocabulary for Mode {
    const WHAT: &'static str = "mode";
    const ALL: &'static [Self] = &[Mode::Eager, Mode::Graph];
    fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Graph => "graph",
        }
    }
}

impl Mode {
    pub fn name(self) -> &'static str {
        Vocabulary::name(self)
    }
}
vocabulary_impls!(Mode);

/// Which decode launches ask L2 for their first weight rows before they wait for the previous
/// grid (`launch.cuh`, `registry::prefetch_rows`). The prefetch pays where the wait overlaps a
/// previous kernel, which needs the programmatic launch attribute; a plain launch starts its
/// own loads right after it, and there the prefetch cost small layers 5-17% in graph mode on
/// the H200 (docs/PERF.md), so only programmatic launches issue it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum L2Prefetch {
    /// Every decode launch, plain or programmatic (the kernels from 1175bcd until the
    /// measurement above; what a CUDA corpus plan without the field was timed with).
    Always,
    /// Only launches with programmatic dependent launch.
    #[default]
    Programmatic,
}

impl Vocabulary for L2Prefetch {
    const WHAT: &'static str = "L2 prefetch";
    const ALL: &'static [Self] = &[L2Prefetch::Always, L2Prefetch::Programmatic];
    fn name(self) -> &'static str {
        match self {
            L2Prefetch::Always => "always",
            L2Prefetch::Programmatic => "programmatic",
        }
    }
}

impl L2Prefetch {
    /// The rule a record (collection plan, profile requests) was written under: one it names,
    /// or, where it names none, the prefetch on every launch, as builds before the rule did.
    pub fn recorded(rule: Option<L2Prefetch>) -> L2Prefetch {
        rule.unwrap_or(L2Prefetch::Always)
    }

    /// The launches that issue it, in words.
    pub fn launches(self) -> &'static str {
        match self {
            L2Prefetch::Always => "every decode launch",
            L2Prefetch::Programmatic => "programmatic decode launches only",
        }
    }

    /// Whether a launch, programmatic or not, asks L2 for its first rows.
    pub fn applies(self, programmatic: bool) -> bool {
        match self {
            L2Prefetch::Always => true,
            L2Prefetch::Programmatic => programmatic,
        }
    }
}
vocabulary_impls!(L2Prefetch);

/// A candidate's id (`decode.wide.tn256.cpt2`) or a baseline's (`copy`, `cublas.f16.gemv`):
/// lower-case ASCII letters, digits, `.`, `_` and `-`, at most 96 bytes. The spelling is
/// checked, not membership: whether an id names a registry candidate is the registry's
/// question (`registry::find`). Ids reach file names, so they never hold a path separator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CandidateId(String);

/// Why a text is not a candidate id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given:?} is not a candidate id: {why}")]
pub struct BadCandidateId {
    pub given: String,
    pub why: &'static str,
}

impl CandidateId {
    pub const MAX_LEN: usize = 96;

    pub fn new(s: impl Into<String>) -> Result<CandidateId, BadCandidateId> {
        let s = s.into();
        let why = if s.is_empty() {
            Some("empty")
        } else if s.len() > Self::MAX_LEN {
            Some("longer than 96 bytes")
        } else if !s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')) {
            Some("only a-z, 0-9, '.', '_' and '-' are allowed")
        } else if s.starts_with('.') || s.contains("..") {
            Some("no leading '.' and no '..'")
        } else {
            None
        };
        match why {
            Some(why) => Err(BadCandidateId { given: s, why }),
            None => Ok(CandidateId(s)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CandidateId {
    type Err = BadCandidateId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CandidateId::new(s.trim())
    }
}

impl std::ops::Deref for CandidateId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for CandidateId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CandidateId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for CandidateId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl std::borrow::Borrow<str> for CandidateId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for CandidateId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CandidateId::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_errors_list_the_valid_ones() {
        for m in Mode::ALL {
            assert_eq!(m.to_string().parse::<Mode>().unwrap(), *m);
            assert_eq!(serde_json::to_string(m).unwrap(), format!("\"{}\"", m.name()));
        }
        let e = "graf".parse::<Mode>().unwrap_err().to_string();
        assert_eq!(e, "unknown mode \"graf\" (valid: eager, graph)");
        let e = "cdua".parse::<BackendChoice>().unwrap_err().to_string();
        assert!(e.contains("cuda, cpu, auto"), "{e}");
        assert!(serde_json::from_str::<Backend>("\"auto\"").is_err());
        assert_eq!(serde_json::from_str::<Surface>("\"prefill\"").unwrap(), Surface::Prefill);
        assert_eq!(
            (Surface::of_m(1), Surface::of_m(31), Surface::of_m(32)),
            (Surface::Decode, Surface::Grouped, Surface::Prefill)
        );
    }

    #[test]
    fn candidate_ids_are_path_safe() {
        assert!(CandidateId::new("decode.wide.tn256.cpt2").is_ok());
        assert!(CandidateId::new("cublas.f16.gemv").is_ok());
        for bad in ["", "x/../y", "../up", "Decode", "a b", "a\\b", ".hidden"] {
            assert!(CandidateId::new(bad).is_err(), "{bad:?}");
        }
        assert!(serde_json::from_str::<CandidateId>("\"../x\"").is_err());
    }
}

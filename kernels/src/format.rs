//! The source-format registry: GGUF block formats, their sizes and the codebook each
//! one is executed with. Adding a format is one row in [`SourceFormat::ALL`] plus a
//! codec in [`crate::codec`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Codebook;

/// A GGUF weight block format (the "source" of a packed matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum SourceFormat {
    Q4_0,
    IQ4_NL,
    IQ4_XS,
    Q4_1,
    Q4_K,
    Q5_0,
    Q5_1,
    Q5_K,
    Q6_K,
    Q8_0,
    MXFP4,
    Q3_K,
    IQ3_XXS,
    IQ3_S,
    Q2_K,
    IQ2_XXS,
    IQ2_XS,
    IQ2_S,
    IQ1_S,
    IQ1_M,
}

/// Static facts about one source format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FormatInfo {
    pub format: SourceFormat,
    /// `ggml_type` id as stored in GGUF tensor infos.
    pub ggml_type: u32,
    pub block_bytes: usize,
    pub block_elems: usize,
    pub codebook: Codebook,
}

impl SourceFormat {
    /// Registry order: the order of DESIGN.md's milestone-1 table.
    pub const ALL: [SourceFormat; 20] = [
        SourceFormat::Q4_0,
        SourceFormat::IQ4_NL,
        SourceFormat::IQ4_XS,
        SourceFormat::Q4_1,
        SourceFormat::Q4_K,
        SourceFormat::Q5_0,
        SourceFormat::Q5_1,
        SourceFormat::Q5_K,
        SourceFormat::Q6_K,
        SourceFormat::Q8_0,
        SourceFormat::MXFP4,
        SourceFormat::Q3_K,
        SourceFormat::IQ3_XXS,
        SourceFormat::IQ3_S,
        SourceFormat::Q2_K,
        SourceFormat::IQ2_XXS,
        SourceFormat::IQ2_XS,
        SourceFormat::IQ2_S,
        SourceFormat::IQ1_S,
        SourceFormat::IQ1_M,
    ];

    pub const fn info(self) -> FormatInfo {
        use Codebook as C;
        use SourceFormat as F;
        let (ggml_type, block_bytes, block_elems, codebook) = match self {
            F::Q4_0 => (2, 18, 32, C::S4),
            F::IQ4_NL => (20, 18, 32, C::Nl4),
            F::IQ4_XS => (23, 136, 256, C::Nl4),
            F::Q4_1 => (3, 20, 32, C::U4),
            F::Q4_K => (12, 144, 256, C::U4),
            F::Q5_0 => (6, 22, 32, C::S5),
            F::Q5_1 => (7, 24, 32, C::U5),
            F::Q5_K => (13, 176, 256, C::U5),
            F::Q6_K => (14, 210, 256, C::S6d),
            F::Q8_0 => (8, 34, 32, C::S8),
            F::MXFP4 => (39, 17, 32, C::E2m1),
            F::Q3_K => (11, 110, 256, C::S3d),
            F::IQ3_XXS => (18, 98, 256, C::Nl3),
            F::IQ3_S => (21, 110, 256, C::O4),
            F::Q2_K => (10, 84, 256, C::U2m),
            F::IQ2_XXS => (16, 66, 256, C::Nl2),
            F::IQ2_XS => (17, 74, 256, C::Nl2d),
            F::IQ2_S => (22, 82, 256, C::Nl2d),
            F::IQ1_S => (19, 50, 256, C::Nl2),
            F::IQ1_M => (29, 56, 256, C::Nl2d),
        };
        FormatInfo { format: self, ggml_type, block_bytes, block_elems, codebook }
    }

    pub const fn block_bytes(self) -> usize {
        self.info().block_bytes
    }

    pub const fn block_elems(self) -> usize {
        self.info().block_elems
    }

    pub const fn codebook(self) -> Codebook {
        self.info().codebook
    }

    /// Storage cost in bits per weight, including scales.
    pub fn bits_per_weight(self) -> f64 {
        (self.block_bytes() * 8) as f64 / self.block_elems() as f64
    }

    pub const fn name(self) -> &'static str {
        match self {
            SourceFormat::Q4_0 => "Q4_0",
            SourceFormat::IQ4_NL => "IQ4_NL",
            SourceFormat::IQ4_XS => "IQ4_XS",
            SourceFormat::Q4_1 => "Q4_1",
            SourceFormat::Q4_K => "Q4_K",
            SourceFormat::Q5_0 => "Q5_0",
            SourceFormat::Q5_1 => "Q5_1",
            SourceFormat::Q5_K => "Q5_K",
            SourceFormat::Q6_K => "Q6_K",
            SourceFormat::Q8_0 => "Q8_0",
            SourceFormat::MXFP4 => "MXFP4",
            SourceFormat::Q3_K => "Q3_K",
            SourceFormat::IQ3_XXS => "IQ3_XXS",
            SourceFormat::IQ3_S => "IQ3_S",
            SourceFormat::Q2_K => "Q2_K",
            SourceFormat::IQ2_XXS => "IQ2_XXS",
            SourceFormat::IQ2_XS => "IQ2_XS",
            SourceFormat::IQ2_S => "IQ2_S",
            SourceFormat::IQ1_S => "IQ1_S",
            SourceFormat::IQ1_M => "IQ1_M",
        }
    }

    pub fn from_ggml_type(id: u32) -> Option<SourceFormat> {
        Self::ALL.into_iter().find(|f| f.info().ggml_type == id)
    }

    /// The source formats that execute with `codebook`, in registry order.
    pub fn aliases_of(codebook: Codebook) -> Vec<SourceFormat> {
        Self::ALL.into_iter().filter(|f| f.codebook() == codebook).collect()
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown source format {0:?} (known: Q4_0, IQ4_NL, IQ4_XS, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, MXFP4, Q3_K, IQ3_XXS, IQ3_S, Q2_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M)"
)]
pub struct UnknownFormat(pub String);

impl FromStr for SourceFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // K-quant mixes name their tensors' format with a size suffix (Q4_K_M); the block format is the same.
        let base = s.trim().to_ascii_uppercase();
        let base = ["_S", "_M", "_L"]
            .iter()
            .find_map(|suffix| base.strip_suffix(suffix).filter(|b| b.ends_with("_K")))
            .unwrap_or(&base);
        Self::ALL.into_iter().find(|f| f.name() == base).ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

#[cfg(feature = "clap")]
impl clap::ValueEnum for SourceFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &SourceFormat::ALL
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

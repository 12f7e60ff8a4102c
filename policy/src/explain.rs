//! Why a policy picks what it picks: for one query, the M bucket, the domain, the overlay or
//! the tree path (each split's feature, its value for the query and the threshold), and for a
//! batched M the decode selection whose bpp the rows inherit. The same steps as `select`.

use crate::eval::{Selection, Step, Via};
use crate::ir::{Feature, Policy, Surface};
use crate::PolicyError;

/// How one domain answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub domain: usize,
    pub via: Via,
    pub candidate: String,
    /// The splits passed (empty for an overlay).
    pub path: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation<'p> {
    pub selection: Selection<'p>,
    pub bucket: usize,
    pub surface: Surface,
    /// The M = 1 decision (whose bpp every row inherits).
    pub decode: Decision,
    /// The batched decision, for M in a grouped or prefill bucket.
    pub batched: Option<Decision>,
}

impl Feature {
    /// How the feature reads in an explanation.
    pub fn describe(self) -> String {
        match self {
            Feature::N => "N".into(),
            Feature::K => "K".into(),
            Feature::NK => "N*K".into(),
            Feature::AspectQ10 => "floor(1024*N/K)".into(),
            Feature::Kblk => "KBLK = K/32".into(),
            Feature::Tiles { w } => format!("tiles = ceil(N/{w})"),
            Feature::Waves { w } => format!("waves = ceil(ceil(N/{w})/units)"),
        }
    }
}

impl Policy {
    /// Explain `select(codebook, mode, m, n, k)` (overlays on, as deployed).
    pub fn explain(&self, codebook: &str, mode: &str, m: u64, n: u64, k: u64) -> Result<Explanation<'_>, PolicyError> {
        let selection = self.select(codebook, mode, m, n, k)?;
        let bucket = self.m_bucket(m).ok_or(PolicyError::NoBucket { m })?;
        let decode_bucket = self.m_bucket(1).ok_or(PolicyError::NoBucket { m: 1 })?;
        let decide = |b: usize| -> Result<Decision, PolicyError> {
            let mut path = Vec::new();
            let (c, via, domain) = self.choose_visiting(codebook, mode, b, n, k, true, &mut |s| path.push(s))?;
            Ok(Decision { domain, via, candidate: c.id.clone(), path })
        };
        let decode = decide(decode_bucket)?;
        let batched = (bucket != decode_bucket).then(|| decide(bucket)).transpose()?;
        Ok(Explanation { surface: self.m_buckets[bucket].surface, selection, bucket, decode, batched })
    }
}

#[cfg(test)]
mod tests {
    use crate::example::example_policy;
    use crate::Via;
    use vnni_kernels::Backend;

    #[test]
    fn an_explanation_follows_the_selection() {
        let p = example_policy(Backend::Cuda);
        for (m, n, k) in [(1, 4096, 4096), (1, 64, 8192), (1, 262_144, 256), (4, 4096, 4096), (16, 100, 3200)] {
            let e = p.explain("s4", "eager", m, n, k).unwrap();
            let s = p.select("s4", "eager", m, n, k).unwrap();
            assert_eq!(e.selection, s);
            let last = e.batched.as_ref().unwrap_or(&e.decode);
            assert_eq!(last.candidate, s.candidate.id);
            if last.via == Via::Tree {
                // Replaying the recorded path reaches the same leaf.
                for step in &last.path {
                    assert_eq!(step.left, step.value <= step.le);
                }
            } else {
                assert!(last.path.is_empty());
            }
        }
        assert!(p.explain("q9", "eager", 1, 64, 64).is_err());
    }
}

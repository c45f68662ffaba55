//! What the audit measures through: a kernel entry point and the data it
//! reads (implemented by the linear and the release-path measurements).

use dp_core::kernel::Session;
use dp_core::{Cost, Measurement, Result};

/// A kernel entry point under audit: its measurement of one dataset.
pub(crate) trait KernelPath: Sync {
    /// The private data it reads.
    type Data: Sync;
    /// One measurement of `data` at `cost`.
    fn measure(&self, data: &Self::Data, session: &mut Session, cost: Cost) -> Result<Measurement>;
}

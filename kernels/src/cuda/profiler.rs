//! The profiler range: `cuProfilerStart` / `cuProfilerStop` around exactly what a profiler run
//! with collection off at start (`ncu --profile-from-start off`) should see. Outside a profiler
//! both calls do nothing.

use cudarc::driver::sys;

use super::device::Gpu;
use super::{driver, CudaError};

impl Gpu {
    /// Run `launch` inside the profiler range: everything queued before is finished first (so
    /// no earlier kernel falls inside), and the range closes only after the launches finished.
    pub fn profiled(&self, launch: &mut dyn FnMut() -> Result<(), CudaError>) -> Result<(), CudaError> {
        self.synchronize()?;
        self.bind_context()?;
        // SAFETY: no arguments; the context is current on this thread.
        unsafe { sys::cuProfilerStart() }.result().map_err(driver("starting the profiler range"))?;
        let launched = launch().and_then(|()| self.synchronize());
        // SAFETY: as above; the range is closed even when the launch failed.
        let stopped = unsafe { sys::cuProfilerStop() }.result().map_err(driver("stopping the profiler range"));
        launched.and(stopped)
    }
}

//! The CUDA clock: a pair of timing events on the device's stream, and CUDA graphs captured
//! from a sequence of launches and replayed. The timing protocol (`vnni-measure`) decides
//! what to time; this module only records and reads events and captures graphs.

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaEvent, CudaGraph, LaunchConfig, PushKernelArg};

use super::device::Gpu;
use super::{driver, CudaError};

/// Two events with timing enabled, recorded on the device's one stream.
pub struct EventClock<'g> {
    gpu: &'g Gpu,
    start: CudaEvent,
    end: CudaEvent,
}

/// Launches captured once into a graph (uploaded), replayed with [`Graph::launch`].
pub struct Graph(CudaGraph);

impl Graph {
    pub fn launch(&self) -> Result<(), CudaError> {
        self.0.launch().map_err(driver("launching a graph"))
    }
}

impl Gpu {
    pub fn clock(&self) -> Result<EventClock<'_>, CudaError> {
        let new = || self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(driver("creating an event"));
        Ok(EventClock { gpu: self, start: new()?, end: new()? })
    }

    /// Capture what `enqueue` launches on the stream into a graph, instantiated and uploaded.
    pub fn capture(&self, enqueue: &mut dyn FnMut() -> Result<(), CudaError>) -> Result<Graph, CudaError> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(driver("beginning a graph capture"))?;
        let enqueued = enqueue();
        let graph = self
            .stream
            .end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
            .map_err(driver("ending a graph capture"));
        enqueued?;
        let graph =
            graph?.ok_or_else(|| CudaError::Driver { what: "graph capture".into(), message: "empty graph".into() })?;
        graph.upload().map_err(driver("uploading a graph"))?;
        Ok(Graph(graph))
    }
}

impl EventClock<'_> {
    /// Record the start event.
    pub fn start(&self) -> Result<(), CudaError> {
        self.start.record(&self.gpu.stream).map_err(driver("recording an event"))
    }

    /// Keep the stream busy for `ns` nanoseconds, then record the start event: launches the
    /// host submits meanwhile are queued when the clock starts.
    pub fn start_after(&self, ns: u64) -> Result<(), CudaError> {
        let f = self.gpu.common_function("vnni_delay")?;
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        let mut b = self.gpu.stream.launch_builder(f);
        b.arg(&ns);
        // SAFETY: one u64 argument, as vnni_delay takes; the kernel touches no memory.
        unsafe { b.launch(cfg) }.map_err(driver("launching the clock's delay"))?;
        self.start()
    }

    /// Record the end event, wait for it, and return the milliseconds since `start`.
    pub fn stop_ms(&self) -> Result<f64, CudaError> {
        self.end.record(&self.gpu.stream).map_err(driver("recording an event"))?;
        self.end.synchronize().map_err(driver("waiting for an event"))?;
        Ok(f64::from(self.start.elapsed_ms(&self.end).map_err(driver("reading an event"))?))
    }
}

//! The sample registry: one module per sample.

use crate::harness::{Opts, Sink};
use crate::vk::{Ctx, Needs, Res};

/// The SPIR-V of `shaders/<name>.comp`, compiled by build.rs.
macro_rules! spv {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".spv"))
    };
}

mod bda;
mod conv2d;
mod multiqueue;
mod pipeline;
mod race;
mod reuse;
mod saxpy;
mod sgemm;
mod stale;
mod suballoc;
mod threads;

pub struct Sample {
    pub name: &'static str,
    pub about: &'static str,
    pub needs: fn(&Opts) -> Needs,
    pub run: fn(&Ctx, &Opts, &mut Sink) -> Res<()>,
}

fn plain(_: &Opts) -> Needs {
    Needs::default()
}

pub const ALL: &[Sample] = &[
    Sample {
        name: "saxpy",
        about: "positive: y = a*x + y, memory-bound, copy-dominated",
        needs: plain,
        run: saxpy::run,
    },
    Sample {
        name: "sgemm",
        about: "positive: tiled shared-memory matrix multiply, compute-heavy",
        needs: plain,
        run: sgemm::run,
    },
    Sample {
        name: "conv2d",
        about: "positive: 5x5 image convolution, in between",
        needs: plain,
        run: conv2d::run,
    },
    Sample {
        name: "pipeline",
        about: "positive: inference-like chain of 5 dispatches, weights uploaded once",
        needs: plain,
        run: pipeline::run,
    },
    Sample {
        name: "suballoc",
        about: "positive: buffers sub-allocated in large blocks, one staging buffer feeds three",
        needs: plain,
        run: suballoc::run,
    },
    Sample {
        name: "multiqueue",
        about: "positive: upload on a second queue, binary + timeline semaphores",
        needs: multiqueue::needs,
        run: multiqueue::run,
    },
    Sample {
        name: "threads",
        about: "positive: several threads record and submit their own pipelines",
        needs: plain,
        run: threads::run,
    },
    Sample {
        name: "race",
        about: "negative (S2): host rewrites staging while the dispatch on the device copy waits",
        needs: race::needs,
        run: race::run,
    },
    Sample {
        name: "stale",
        about: "negative (S1): staging reused as scratch; device buffer read again, no upload",
        needs: plain,
        run: stale::run,
    },
    Sample {
        name: "reuse",
        about: "negative: one staging buffer refilled for several long-lived destinations",
        needs: plain,
        run: reuse::run,
    },
    Sample {
        name: "bda",
        about: "negative (S3): device buffers used through buffer device addresses",
        needs: bda::needs,
        run: bda::run,
    },
];

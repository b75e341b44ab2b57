//! The chassis (issue 56): the one place that calls the modes. A behaviour body in `hooks/`
//! describes its command (`crate::events`) and hands it here with the call down; this module
//! knows which modes a device has and calls each, through the one trait
//! [`Mode`](crate::events::Mode), in one order:
//!
//! **profile → GPU timing → guard → enforce → the next layer**, outermost first.
//!
//! Each mode sees the call as the modes outside it left it, and what it lets go on reaches the
//! modes inside it; observations before the call run in that order ([`Mode::before`]), those
//! after it in the reverse order ([`Mode::after`]), as the frames of nested calls unwind.
//! Why this order:
//!
//! - **profile outermost**: it records what the *application* asked for (the trace is the
//!   program's behaviour, not echo's rewrite of it) and learns last how the call went;
//! - **GPU timing inside profile**: its timestamps take the sequence number profile gave the
//!   command ([`Told`]) and bracket exactly what goes down;
//! - **the guard outside enforce**: it must see the command buffers and buffers the application
//!   named (a submission before enforce leaves out the command buffers that held only dropped
//!   copies, whose elided ranges the guard protects), and it counts what a recorded command
//!   uses once the command went down, after enforce bound any buffer it still held back;
//! - **enforce innermost**: it changes what reaches the driver (self-copies dropped, empty
//!   command buffers left out, binds redirected), so nothing after it may see anything but the
//!   call that goes down.
//!
//! Profile (with its GPU timing) and enforce (with its guard) never run on the same device
//! (`coordinator`), so the order within each pair is what matters; it is written here once.
//! Adding a mode is a field of [`Modes`], a line in [`Modes::of`] and in each chain below, and
//! an `impl Mode` in the mode's folder: no hook changes.

use crate::dispatch::DeviceData;
use crate::events::{
    Allocate, BindDown, BufferBinds, BufferCopy, Cmd, CreateBuffer, Down, Free, MapMemory, Mode,
    Next, Ranges, Submission, Told, Wait,
};
use crate::submit::Batch;
use ash::vk;

/// The modes a device runs, in the chassis order.
#[derive(Clone, Copy)]
pub struct Modes<'a> {
    pub profile: Option<&'a crate::profile::Profiler>,
    pub timing: Option<&'a crate::profile::gputime::GpuTimer>,
    pub guard: Option<&'a crate::enforce::guard::Guard>,
    pub enforce: Option<&'a crate::enforce::Enforcer>,
}

impl<'a> Modes<'a> {
    /// No mode runs (GPU timing comes only with profile, the guard only with enforce).
    #[inline]
    pub fn none(&self) -> bool {
        self.profile.is_none() && self.enforce.is_none()
    }

    /// The modes of `dev`.
    #[inline]
    pub fn of(dev: &'a DeviceData) -> Modes<'a> {
        let profile = dev.profile();
        let enforce = dev.enforce();
        Modes {
            profile,
            timing: profile.and_then(|p| p.gpu()),
            guard: enforce.and_then(|e| e.guard()),
            enforce,
        }
    }
}

/// Calls `$f` on each mode of `$m` that runs, in the chassis order.
macro_rules! each {
    ($m:expr, |$x:ident| $f:expr) => {{
        let m = $m;
        if let Some($x) = m.profile {
            $f;
        }
        if let Some($x) = m.timing {
            $f;
        }
        if let Some($x) = m.guard {
            $f;
        }
        if let Some($x) = m.enforce {
            $f;
        }
    }};
}

/// Calls `$f` on each mode of `$m` that runs, in the reverse order.
macro_rules! each_back {
    ($m:expr, |$x:ident| $f:expr) => {{
        let m = $m;
        if let Some($x) = m.enforce {
            $f;
        }
        if let Some($x) = m.guard {
            $f;
        }
        if let Some($x) = m.timing {
            $f;
        }
        if let Some($x) = m.profile {
            $f;
        }
    }};
}

/// One link of a chain: mode `m` (when it runs) around `next`.
#[inline(always)]
fn link<'n, M: Mode, A, R>(
    m: Option<&'n M>,
    call: impl Fn(&'n M, A, Next<'_, A, R>) -> R + 'n,
    next: Next<'n, A, R>,
) -> impl FnMut(A) -> R + 'n {
    move |a| match m {
        Some(m) => call(m, a, &mut *next),
        None => next(a),
    }
}

/// Whether the result of a call down counts as success for [`Mode::after`].
pub trait Outcome {
    fn ok(&self) -> bool;
}

impl Outcome for () {
    fn ok(&self) -> bool {
        true
    }
}

impl Outcome for vk::Result {
    fn ok(&self) -> bool {
        *self == vk::Result::SUCCESS
    }
}

/// Whether any mode reads what recorded commands use (a caller that must allocate to describe
/// them need not otherwise).
#[inline]
pub fn wanted(dev: &DeviceData) -> bool {
    let mut any = false;
    each!(Modes::of(dev), |x| any |= x.wants_uses());
    any
}

/// How echo's double mappings are made on this device from now on (profile's, or guarded
/// enforce's host imports): the first mode's in the chassis order; `None`: they are not.
#[inline]
pub fn backing(dev: &DeviceData) -> Option<crate::hostmem::export::Backing> {
    let mut way = None;
    each!(Modes::of(dev), |x| way = way.or_else(|| x.backing()));
    way
}

/// The smallest size of the objects that need a stable key on this device (`u64::MAX`: none).
pub fn key_floor(dev: &DeviceData) -> u64 {
    let mut floor = None;
    each!(Modes::of(dev), |x| floor =
        floor.or_else(|| x.key_floor(dev)));
    floor.unwrap_or(u64::MAX)
}

/// Whether any mode reads descriptor update templates.
#[inline]
pub fn wants_templates(dev: &DeviceData) -> bool {
    let mut any = false;
    each!(Modes::of(dev), |x| any |= x.wants_templates());
    any
}

/// `cmd` is told to the modes before `down()` makes the call, and after it in the reverse
/// order with whether it succeeded.
///
/// # Safety
/// `cmd` describes the application's valid arguments.
#[inline]
pub unsafe fn call<R: Outcome>(dev: &DeviceData, cmd: &Cmd<'_>, down: impl FnOnce() -> R) -> R {
    let m = Modes::of(dev);
    if m.none() {
        return down();
    }
    each!(m, |x| x.before(dev, cmd));
    let r = down();
    let ok = r.ok();
    each_back!(m, |x| x.after(dev, cmd, ok));
    r
}

/// `cmd` is told to the modes before the call (which the caller makes).
///
/// # Safety
/// As [`call`].
#[inline]
pub unsafe fn before(dev: &DeviceData, cmd: &Cmd<'_>) {
    each!(Modes::of(dev), |x| x.before(dev, cmd));
}

/// `cmd` is told to the modes after the call went down and succeeded (the caller made it, and
/// what the modes read was known only then).
///
/// # Safety
/// As [`call`].
#[inline]
pub unsafe fn after(dev: &DeviceData, cmd: &Cmd<'_>) {
    each_back!(Modes::of(dev), |x| x.after(dev, cmd, true));
}

/// A call through the chain of modes, outermost first: `$call` is one mode's around method
/// (`$x` the mode, `$a` what reaches it, `$n` the modes inside it), `$down` the next layer.
macro_rules! chain {
    ($m:expr, |$x:ident, $a:pat_param, $n:ident| $call:expr, $down:expr, $arg:expr) => {{
        let m = $m;
        let d = $down;
        if m.none() {
            d($arg) // no mode runs: straight down (costs.rs counts a plan-less device)
        } else {
            let mut e = link(m.enforce, |$x, $a, $n| $call, d);
            let mut g = link(m.guard, |$x, $a, $n| $call, &mut e);
            let mut t = link(m.timing, |$x, $a, $n| $call, &mut g);
            let mut p = link(m.profile, |$x, $a, $n| $call, &mut t);
            p($arg)
        }
    }};
}

/// A `()` call down as a [`Next`] that calls `down` once.
fn once<A>(down: impl FnOnce(A)) -> impl FnMut(A) {
    let mut down = Some(down);
    move |a| {
        if let Some(f) = down.take() {
            f(a)
        }
    }
}

/// A buffer copy through the modes; `down(c)` records `c` at the next layer.
///
/// # Safety
/// `c` describes the application's valid arguments.
pub unsafe fn copy<C: BufferCopy>(dev: &DeviceData, c: C, mut down: impl FnMut(C)) {
    let told = Told::default();
    let t = &told;
    chain!(Modes::of(dev), |x, c, n| x.copy(dev, c, t, n), &mut down, c)
}

/// A queue submission through the modes; `down(s)` submits `s` at the next layer.
///
/// # Safety
/// `s` holds the application's valid batches.
#[inline(always)] // one instance per command, in its intercept: costs.rs counts a submission
pub unsafe fn submit<B: Batch>(
    dev: &DeviceData,
    s: Submission<B>,
    mut down: impl FnMut(Submission<B>) -> vk::Result,
) -> vk::Result {
    let told = Told::default();
    let t = &told;
    chain!(
        Modes::of(dev),
        |x, s, n| x.submit(dev, s, t, n),
        &mut down,
        s
    )
}

/// A host wait through the modes; `down()` waits at the next layer.
///
/// # Safety
/// `what` describes the application's valid arguments.
pub unsafe fn wait(
    dev: &DeviceData,
    what: Wait<'_>,
    down: impl FnOnce() -> vk::Result,
) -> vk::Result {
    let mut down = Some(down);
    let mut d = move |()| down.take().map_or(vk::Result::SUCCESS, |f| f());
    chain!(Modes::of(dev), |x, _, n| x.wait(dev, what, n), &mut d, ())
}

/// `vkCreateBuffer` through the modes; `down(c)` creates the buffer at the next layer (and
/// records it on success).
///
/// # Safety
/// `c` describes the application's valid arguments.
pub unsafe fn create_buffer(
    dev: &DeviceData,
    c: CreateBuffer,
    mut down: impl FnMut(CreateBuffer) -> vk::Result,
) -> vk::Result {
    chain!(
        Modes::of(dev),
        |x, c, n| x.create_buffer(dev, c, n),
        &mut down,
        c
    )
}

/// `vkDestroyBuffer` through the modes; `down()` destroys it at the next layer.
pub fn destroy_buffer(dev: &DeviceData, buffer: u64, down: impl FnOnce()) {
    let mut d = once(|()| down());
    chain!(
        Modes::of(dev),
        |x, _, n| x.destroy_buffer(dev, buffer, n),
        &mut d,
        ()
    )
}

/// Buffer binds through the modes; `down(how)` binds at the next layer.
///
/// # Safety
/// `b` describes the application's valid arguments.
pub unsafe fn bind_buffers(
    dev: &DeviceData,
    b: &BufferBinds<'_>,
    mut down: impl FnMut(BindDown) -> vk::Result,
) -> vk::Result {
    let m = Modes::of(dev);
    chain!(
        m,
        |x, h, n| x.bind_buffers(dev, b, h, n),
        &mut down,
        BindDown::AsAsked
    )
}

/// `vkAllocateMemory` through the modes; `down(a)` allocates `a.info` at the next layer (and
/// records the allocation on success).
///
/// # Safety
/// `a` describes the application's valid arguments.
pub unsafe fn allocate(
    dev: &DeviceData,
    a: Allocate,
    mut down: impl FnMut(Allocate) -> vk::Result,
) -> vk::Result {
    chain!(
        Modes::of(dev),
        |x, a, n| x.allocate(dev, a, n),
        &mut down,
        a
    )
}

/// `vkFreeMemory` through the modes; `down(how)` frees at the next layer.
pub fn free(dev: &DeviceData, f: Free, mut down: impl FnMut(Down)) {
    chain!(
        Modes::of(dev),
        |x, h, n| x.free_memory(dev, f, h, n),
        &mut down,
        Down::AsAsked
    )
}

/// `vkMapMemory(2)` through the modes; `down(how)` maps at the next layer.
///
/// # Safety
/// `mm` describes the application's valid arguments.
pub unsafe fn map(
    dev: &DeviceData,
    mm: MapMemory,
    mut down: impl FnMut(Down) -> vk::Result,
) -> vk::Result {
    chain!(
        Modes::of(dev),
        |x, h, n| x.map_memory(dev, mm, h, n),
        &mut down,
        Down::AsAsked
    )
}

/// `vkUnmapMemory(2)` through the modes; `down(how)` unmaps at the next layer.
pub fn unmap(dev: &DeviceData, memory: u64, mut down: impl FnMut(Down)) {
    chain!(
        Modes::of(dev),
        |x, h, n| x.unmap_memory(dev, memory, h, n),
        &mut down,
        Down::AsAsked
    )
}

/// Flushed or invalidated ranges through the modes; `down(r)` passes them to the next layer.
///
/// # Safety
/// `r` holds the application's valid ranges.
pub unsafe fn ranges(
    dev: &DeviceData,
    r: Ranges,
    mut down: impl FnMut(Ranges) -> vk::Result,
) -> vk::Result {
    chain!(Modes::of(dev), |x, r, n| x.ranges(dev, r, n), &mut down, r)
}

/// The handle the driver knows for `memory` (the first mode in order that serves memory
/// handles answers; `None`: none does, it is the application's).
pub fn driver_memory(
    dev: &DeviceData,
    memory: u64,
    why: &dyn Fn() -> String,
) -> Option<Result<u64, vk::Result>> {
    let mut r = None;
    each!(Modes::of(dev), |x| if r.is_none() {
        r = x.driver_memory(dev, memory, why)
    });
    r
}

/// Whether a mode made `memory` at the driver (see [`Mode::unmade`]).
pub fn unmade(dev: &DeviceData, memory: u64) -> Option<Option<u64>> {
    let mut r = None;
    each!(Modes::of(dev), |x| if r.is_none() {
        r = x.unmade(memory)
    });
    r
}

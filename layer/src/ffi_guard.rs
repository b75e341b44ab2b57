//! Panic safety (DESIGN §3 "never take the app down").
//!
//! Every exported entry point and every hook runs inside `catch_unwind`. On a panic echo logs
//! once, marks the device (or, outside a device, the layer) failed — passthrough from then on —
//! and still completes the application's call through the next layer: if the call had already
//! gone down, its recorded result is returned; otherwise it is forwarded now.

use crate::dispatch::{self, typed, DeviceData};
use crate::hook_id::HookId;
use crate::log;
use ash::vk;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

static LAYER_FAILED: AtomicBool = AtomicBool::new(false);

/// Set after a panic outside any device: devices created from then on stay inactive.
pub fn layer_failed() -> bool {
    LAYER_FAILED.load(Ordering::Relaxed)
}

fn fail_layer(what: &str) {
    if !LAYER_FAILED.swap(true, Ordering::Relaxed) {
        log::error!("internal error in {what}; echo falls back to passthrough");
    }
}

/// What a call returns when echo cannot even find the next layer (a handle echo never saw).
pub trait Fallback: Copy {
    fn fallback() -> Self;
}
impl Fallback for vk::Result {
    fn fallback() -> Self {
        vk::Result::ERROR_INITIALIZATION_FAILED
    }
}
impl Fallback for () {
    fn fallback() -> Self {}
}
impl Fallback for u64 {
    fn fallback() -> Self {
        0
    }
}
impl Fallback for u32 {
    fn fallback() -> Self {
        0
    }
}
impl Fallback for vk::PFN_vkVoidFunction {
    fn fallback() -> Self {
        None
    }
}

/// Records the result of the call once it went down to the next layer.
pub struct Down<R: Copy>(Cell<Option<R>>);

impl<R: Copy> Down<R> {
    /// Note that the next layer returned `r`; returns it.
    #[inline]
    pub fn record(&self, r: R) -> R {
        self.0.set(Some(r));
        r
    }
}

/// Runs `body`; on a panic logs once, marks the layer failed and returns the recorded result of
/// the call if it already went down, else `pass()` (which forwards it).
pub fn guard<R: Copy>(name: &str, pass: impl FnOnce() -> R, body: impl FnOnce(&Down<R>) -> R) -> R {
    let down = Down(Cell::new(None));
    match catch_unwind(AssertUnwindSafe(|| body(&down))) {
        Ok(r) => r,
        Err(_) => {
            fail_layer(name);
            match down.0.get() {
                Some(r) => r,
                None => pass(),
            }
        }
    }
}

/// A plain guard for code that forwards nothing: on a panic, log and return `fallback`.
pub fn guard_value<R>(name: &str, fallback: impl FnOnce() -> R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        fail_layer(name);
        fallback()
    })
}

/// One intercepted device-level call, as a hook body sees it.
pub struct Call<'a, F: Copy, R: Copy> {
    pub dev: &'a DeviceData,
    /// The next layer's function for the exact command the application called.
    pub next: F,
    pub id: HookId,
    /// The call's first (dispatchable) argument: for a `vkCmd*` hook, the command buffer.
    pub first: u64,
    result: Cell<Option<R>>,
}

impl<F: Copy, R: Copy> Call<'_, F, R> {
    /// Wrap the call to the next layer: `cx.down((cx.next)(args))`. Records the result, so that
    /// a later panic in the hook does not forward the call twice.
    #[inline]
    pub fn down(&self, r: R) -> R {
        self.result.set(Some(r));
        // Issue 35: a recorded command went down, so its command buffer holds real work
        // (`enforce/enforcer/empty.rs`). Every intercepted `vkCmd*` calls down — followed,
        // stepped aside from or marked — except a copy whose every region echo dropped.
        if self.id.records() {
            if let Some(e) = self.dev.enforce() {
                e.mark_content(self.first);
            }
        }
        if let Some(p) = self.dev.panic_at {
            if p.after && p.hook == self.id {
                panic!(
                    "VK_ECHO_TEST_PANIC: injected panic in {} after the call went down",
                    self.id.name()
                );
            }
        }
        r
    }
}

/// The one panic guard of every intercept (`hooks/intercept_gen.rs`): find the device by the
/// dispatch key of `first` (the call's dispatchable handle) and the next layer's pointer for
/// `id` — warning once and returning [`Fallback`] when either is missing — pass straight
/// through when the device is inactive or failed, otherwise run `body` under `catch_unwind`: on
/// a panic the device is marked failed and the call completes (its recorded result if it went
/// down, else forwarded now).
#[inline]
pub fn intercept<F: Copy, R: Fallback>(
    first: u64,
    id: HookId,
    body: impl FnOnce(&Call<'_, F, R>) -> R,
    pass: impl FnOnce(F) -> R,
) -> R {
    // SAFETY: the first parameter of every hooked command is a dispatchable handle.
    let key = unsafe { dispatch::key_of(first) };
    let outer = catch_unwind(AssertUnwindSafe(|| {
        let Some(dev) = dispatch::device_for_call(key) else {
            log::warn_once(
                id.name(),
                format_args!("{} called on a device echo does not know", id.name()),
            );
            return R::fallback();
        };
        let Some(p) = dev.next[id as usize] else {
            log::warn_once(
                id.name(),
                format_args!("{} is missing in the next layer", id.name()),
            );
            return R::fallback();
        };
        // SAFETY: next[id] was resolved for exactly this command.
        let next: F = unsafe { typed(p) };
        if !dev.is_active() {
            return pass(next);
        }
        let cx = Call {
            dev: &dev,
            next,
            id,
            first,
            result: Cell::new(None),
        };
        let r = catch_unwind(AssertUnwindSafe(|| {
            if let Some(p) = dev.panic_at {
                if !p.after && p.hook == id {
                    panic!("VK_ECHO_TEST_PANIC: injected panic in {}", id.name());
                }
            }
            body(&cx)
        }));
        match r {
            Ok(r) => r,
            Err(_) => {
                dev.fail(id.name());
                match cx.result.get() {
                    Some(r) => r,
                    None => pass(next),
                }
            }
        }
    }));
    outer.unwrap_or_else(|_| R::fallback())
}

//! GPU time in profile mode (issue 47): timestamp queries around every submission and every
//! recorded `vkCmdCopyBuffer`, read back without stalling the program, written into the trace as
//! [`Event::GpuTime`] records.
//!
//! - **Submissions.** Per queue, echo keeps its own command pool (of the queue's family), its
//!   own `TIMESTAMP` query pool and [`SLOTS_PER_QUEUE`] slots; each slot is a pair of queries and
//!   two command buffers recorded once (`SIMULTANEOUS_USE`): *begin* resets the pair and writes
//!   the first at `BOTTOM_OF_PIPE` (when everything submitted before on the queue is done),
//!   *end* writes the second at `BOTTOM_OF_PIPE`. `begin` goes in front of the first batch that
//!   holds command buffers, `end` behind the last one: the application's waits, signals, fence
//!   and order are untouched (no batch gains or loses a semaphore, none is added). A submission
//!   whose batches chain anything but timeline values (device groups, protected submits, keyed
//!   mutexes …) or whose queue family has no timestamp bits, or no graphics or compute (no
//!   `vkCmdResetQueryPool` there), is left exactly as it is.
//! - **Copies.** Around each `vkCmdCopyBuffer(2)` recorded into the application's command
//!   buffer, echo records `vkCmdResetQueryPool` of a pair and a `BOTTOM_OF_PIPE` timestamp
//!   before and after, in a device-wide query pool handed out in blocks per recording. Only where
//!   every queue family the application created queues in can take them (timestamps, graphics or
//!   compute, nothing protected), and not in command buffers begun with `SIMULTANEOUS_USE` (two
//!   executions at once would share the pair).
//! - **Reading back.** Never with `VK_QUERY_RESULT_WAIT_BIT`, and only when the host has seen
//!   every submission of the device complete (a fence it or a later submission on its queue
//!   carries, idle, a timeline value it signals) and no submission is going down: some drivers
//!   wait for the whole device in `vkGetQueryPoolResults` even without the wait bit (lavapipe
//!   22.3), which would stall the program, or deadlock it where a submission waits on a
//!   semaphore the host signals later (`c_draw_race readback`; tests/tests/timeline.rs). A
//!   submission's results are set aside when the host sees it complete and read at the next such
//!   idle point; a program that never lets the device go idle keeps its submissions untimed once
//!   the slots are spent (they are drawn by the host's observations). A command buffer's copies
//!   are read with the submission that ran them last.
//! - **Clock.** With `VK_KHR/EXT_calibrated_timestamps` (enabled by echo where the device offers
//!   it, with `CLOCK_MONOTONIC` among its time domains) ticks are mapped onto the trace's clock
//!   (`clock: host`; recalibrated every second); otherwise they are written as device
//!   nanoseconds (`clock: device`) and the reader places them by the host's observations.
//!
//! Any error from echo's own calls turns GPU timing off for the device (one log line); the
//! application's calls are never affected.

use super::sink::{self, Sink};
use crate::log;
use crate::records::{raw, Device, HandleMap};
use crate::submit::Batch;
use ash::vk;
use ash::vk::Handle;
use echo_analyzer::trace::{Event, GpuClock};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

mod copies;
mod timing_mode;

/// Timestamp slots (pairs of queries) per queue: submissions in flight at once that are timed.
pub const SLOTS_PER_QUEUE: u32 = 32;
/// Copy timestamp pairs per block; a recording takes a block at its first copy and another
/// every [`PAIRS_PER_BLOCK`] copies.
const PAIRS_PER_BLOCK: u32 = 8;
/// Blocks in the device's copy query pool (2 × 8 × 256 = 4096 queries).
const COPY_BLOCKS: u32 = 256;
/// Submissions waiting for their results per queue, at most (the oldest are dropped).
const MAX_PENDING: usize = 512;
/// Recalibrate the device clock against the host's this often.
const RECALIBRATE_NS: u64 = 1_000_000_000;

/// A recording's timed copies (`copies.rs`; here so that this file names none of its own).
#[derive(Default)]
pub(super) struct CmdCopies {
    pub(super) blocks: Vec<u32>,
    /// (first query of the pair, `seq` of the copy's record).
    pub(super) copies: Vec<(u32, u64)>,
    /// Secondaries executed by it (their copies run in its submissions).
    pub(super) secondaries: Vec<u64>,
    /// Submitted since its copies were last read: `(queue, submission seq)`.
    pub(super) submitted: Option<(u64, u64)>,
    /// Begun with `SIMULTANEOUS_USE`: not timed.
    pub(super) simultaneous: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone, Copy)]
struct Family {
    /// `timestampValidBits` as a mask (0: no timestamps).
    mask: u64,
    /// Graphics or compute: `vkCmdResetQueryPool` may be recorded.
    resettable: bool,
}

/// One slot of a queue: its begin and end command buffers.
struct Slot {
    begin: vk::CommandBuffer,
    end: vk::CommandBuffer,
    /// Its queries were reset on the device before (a submission with it was read back), so
    /// reading them is never reading uninitialized queries.
    used: bool,
    /// The values last read (a read that finds them again found stale results).
    last: (u64, u64),
}

/// A submission the host has not seen complete, or whose results are not read yet.
struct Pending {
    submit: u64,
    slot: Option<u32>,
    fence: u64,
    signals: Vec<(u64, u64)>,
    /// The command buffers (secondaries included) whose copies it ran.
    cmds: Vec<u64>,
}

/// One queue of the device: every submission on it until the host saw it complete and its
/// results were read; echo's pools where the queue is timed.
struct QueueTimer {
    queue: u64,
    mask: u64,
    /// Echo's pools exist (the family has timestamps and graphics or compute).
    timed: bool,
    cmd_pool: vk::CommandPool,
    query_pool: vk::QueryPool,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Submitted, not yet seen complete by the host.
    pending: VecDeque<Pending>,
    /// Seen complete, results not yet read (they are read when the whole device is).
    done: VecDeque<Pending>,
}

/// The device clock against the host's: a device tick count and the `CLOCK_MONOTONIC` reading
/// taken with it.
#[derive(Clone, Copy)]
struct Calibration {
    ticks: u64,
    host_ns: u64,
    /// When it was taken (`CLOCK_MONOTONIC`).
    at: u64,
}

pub struct GpuTimer {
    device: vk::Device,
    /// The next layer's Vulkan 1.0 commands (echo's own calls).
    fp: ash::DeviceFnV1_0,
    sink: &'static Sink,
    index: u32,
    /// Nanoseconds per tick.
    period: f64,
    families: Vec<Family>,
    calibrated: Option<vk::PFN_vkGetCalibratedTimestampsKHR>,
    calibration: Mutex<Option<Calibration>>,
    queues: HandleMap<u64, Arc<Mutex<QueueTimer>>>,
    /// Queue → its family's timestamp mask (queues with a timer).
    masks: HandleMap<u64, u64>,
    /// Copy timing allowed on this device (every family the application uses can take it).
    copies_on: bool,
    copy_pool: Mutex<Option<vk::QueryPool>>,
    copy_free: Mutex<Vec<u32>>,
    /// Per copy pair (by first query / 2): the values last read.
    copy_last: Mutex<Vec<(u64, u64)>>,
    cmds: HandleMap<u64, CmdCopies>,
    failed: AtomicBool,
    /// Submissions hold it shared from before they are counted until they went down; results
    /// are read only by a `try_write` holder that finds every submission of the device seen
    /// complete (see [`GpuTimer::observed`]).
    gate: RwLock<()>,
}

/// Which extension to enable for calibrated timestamps on this device, if any: the KHR one,
/// else the EXT one, when offered (`have`) and their dependency is met (Vulkan 1.1, or
/// `VK_KHR_get_physical_device_properties2` enabled on the instance).
pub fn calibration_extension(
    have: &std::collections::HashSet<String>,
    version_1_1: bool,
    instance_props2: bool,
) -> Option<&'static std::ffi::CStr> {
    if !(version_1_1 || instance_props2) {
        return None;
    }
    [
        c"VK_KHR_calibrated_timestamps",
        c"VK_EXT_calibrated_timestamps",
    ]
    .into_iter()
    .find(|c| have.contains(c.to_str().unwrap_or_default()))
}

impl GpuTimer {
    /// GPU timing for `dev` (profile mode), or `None` (with the reason logged) where no queue
    /// family the application uses has timestamps or the application creates protected queues.
    pub fn new(dev: &Device, sink: &'static Sink, index: u32) -> Option<GpuTimer> {
        let inst = dev.instance.as_ref()?;
        let mut props = vk::PhysicalDeviceProperties::default();
        // SAFETY: the physical device belongs to this instance; the out struct is valid.
        unsafe { (inst.fp.get_physical_device_properties)(dev.physical_device, &mut props) };
        let mut n = 0u32;
        let qf = inst.fp.get_physical_device_queue_family_properties;
        // SAFETY: the two-call idiom with valid pointers.
        unsafe { qf(dev.physical_device, &mut n, std::ptr::null_mut()) };
        let mut fams = vec![vk::QueueFamilyProperties::default(); n as usize];
        unsafe { qf(dev.physical_device, &mut n, fams.as_mut_ptr()) };
        fams.truncate(n as usize);
        let families: Vec<Family> = fams
            .iter()
            .map(|f| Family {
                mask: match f.timestamp_valid_bits {
                    0 => 0,
                    64.. => u64::MAX,
                    b => (1u64 << b) - 1,
                },
                resettable: f
                    .queue_flags
                    .intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE),
            })
            .collect();
        if dev
            .queues_created
            .iter()
            .any(|(_, flags)| flags.contains(vk::DeviceQueueCreateFlags::PROTECTED))
        {
            log::info!("profile: no GPU timestamps (the application creates protected queues)");
            return None;
        }
        let usable = |f: u32| {
            families
                .get(f as usize)
                .is_some_and(|x| x.mask != 0 && x.resettable)
        };
        if !dev.queues_created.iter().any(|(f, _)| usable(*f)) {
            log::info!(
                "profile: no GPU timestamps (no queue family the application uses has timestamps with graphics or compute)"
            );
            return None;
        }
        let copies_on = dev.queues_created.iter().all(|(f, _)| usable(*f));
        if !props.limits.timestamp_period.is_finite() || props.limits.timestamp_period <= 0.0 {
            log::info!("profile: no GPU timestamps (timestampPeriod is 0)");
            return None;
        }
        let t = GpuTimer {
            device: dev.handle,
            fp: dev.fp.clone(),
            sink,
            index,
            period: props.limits.timestamp_period as f64,
            families,
            calibrated: calibration(dev),
            calibration: Mutex::new(None),
            queues: HandleMap::default(),
            masks: HandleMap::default(),
            copies_on,
            copy_pool: Mutex::new(None),
            copy_free: Mutex::new(Vec::new()),
            copy_last: Mutex::new(Vec::new()),
            cmds: HandleMap::default(),
            failed: AtomicBool::new(false),
            gate: RwLock::new(()),
        };
        t.calibrate();
        log::info!(
            "profile: GPU timestamps around submissions{}; {}",
            if copies_on { " and copies" } else { "" },
            if t.calibration_now().is_some() {
                "mapped onto the host clock with calibrated timestamps"
            } else {
                "placed by the host's observations (no calibrated timestamps)"
            }
        );
        Some(t)
    }

    fn on(&self) -> bool {
        !self.failed.load(Ordering::Relaxed) && self.sink.is_active()
    }

    fn fail(&self, what: &str, r: vk::Result) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            log::warn!("profile: {what} failed ({r:?}); GPU timestamps are off for this device");
        }
    }

    fn calibration_now(&self) -> Option<Calibration> {
        *lock(&self.calibration)
    }

    /// A fresh pair of device and host readings (calibrated timestamps only).
    fn calibrate(&self) {
        let Some(get) = self.calibrated else { return };
        let infos = [
            vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::DEVICE),
            vk::CalibratedTimestampInfoKHR::default()
                .time_domain(vk::TimeDomainKHR::CLOCK_MONOTONIC),
        ];
        let mut out = [0u64; 2];
        let mut deviation = 0u64;
        // SAFETY: two valid infos, two out values.
        let r = unsafe {
            get(
                self.device,
                2,
                infos.as_ptr(),
                out.as_mut_ptr(),
                &mut deviation,
            )
        };
        if r != vk::Result::SUCCESS {
            log::debug!("profile: vkGetCalibratedTimestamps failed ({r:?})");
            return;
        }
        *lock(&self.calibration) = Some(Calibration {
            ticks: out[0],
            host_ns: out[1],
            at: sink::monotonic_ns(),
        });
    }

    /// The calibration to map with now (recalibrated when old), if the device has one.
    fn clock(&self) -> Option<Calibration> {
        self.calibrated?;
        let c = self.calibration_now();
        if c.is_none_or(|c| sink::monotonic_ns().saturating_sub(c.at) > RECALIBRATE_NS) {
            self.calibrate();
        }
        self.calibration_now()
    }

    // ------------------------------------------------------------------------ submissions

    /// The record of `queue`, made at its first submission, with echo's pools where its family
    /// can be timed.
    fn queue_timer(&self, dev: &Device, queue: u64) -> Arc<Mutex<QueueTimer>> {
        if let Some(q) = self.queues.get(&queue) {
            return q.clone();
        }
        let family = dev.state.queue_family.get(&queue).map(|f| *f);
        let f = family.and_then(|f| self.families.get(f as usize).copied());
        let mut q = QueueTimer {
            queue,
            mask: f.map_or(u64::MAX, |f| f.mask),
            timed: false,
            cmd_pool: vk::CommandPool::null(),
            query_pool: vk::QueryPool::null(),
            slots: Vec::new(),
            free: Vec::new(),
            pending: VecDeque::new(),
            done: VecDeque::new(),
        };
        if let (Some(family), Some(f), true) = (family, f, self.on()) {
            if f.mask != 0 && f.resettable {
                self.make_pools(&mut q, family);
            }
        }
        let q = Arc::new(Mutex::new(q));
        self.masks
            .insert(queue, q.lock().map_or(u64::MAX, |g| g.mask));
        self.queues.entry(queue).or_insert(q).clone()
    }

    /// Echo's command pool (of the queue's `family`) and query pool for queue `q`.
    fn make_pools(&self, q: &mut QueueTimer, family: u32) {
        let fp = &self.fp;
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(family);
        // SAFETY: valid create infos and out handles, through the next layer.
        let r = unsafe {
            (fp.create_command_pool)(self.device, &pool_info, std::ptr::null(), &mut q.cmd_pool)
        };
        if r != vk::Result::SUCCESS {
            self.fail("vkCreateCommandPool", r);
            return;
        }
        let qp_info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(2 * SLOTS_PER_QUEUE);
        let r = unsafe {
            (fp.create_query_pool)(self.device, &qp_info, std::ptr::null(), &mut q.query_pool)
        };
        if r != vk::Result::SUCCESS {
            unsafe { (fp.destroy_command_pool)(self.device, q.cmd_pool, std::ptr::null()) };
            q.cmd_pool = vk::CommandPool::null();
            self.fail("vkCreateQueryPool", r);
            return;
        }
        q.timed = true;
    }

    /// A free slot of `q`, recording a new one while there are fewer than [`SLOTS_PER_QUEUE`].
    fn take_slot(&self, dev: &Device, q: &mut QueueTimer) -> Option<u32> {
        if !q.timed {
            return None;
        }
        if let Some(s) = q.free.pop() {
            return Some(s);
        }
        let i = q.slots.len() as u32;
        if i >= SLOTS_PER_QUEUE {
            return None;
        }
        let fp = &self.fp;
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(q.cmd_pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(2);
        let mut cbs = [vk::CommandBuffer::null(); 2];
        // SAFETY: a valid allocate info for two command buffers.
        let r = unsafe { (fp.allocate_command_buffers)(self.device, &info, cbs.as_mut_ptr()) };
        if r != vk::Result::SUCCESS {
            self.fail("vkAllocateCommandBuffers", r);
            return None;
        }
        let free = |why: &str| {
            // SAFETY: echo's own command buffers, never submitted.
            unsafe { (fp.free_command_buffers)(self.device, q.cmd_pool, 2, cbs.as_ptr()) };
            self.fail(why, vk::Result::ERROR_UNKNOWN);
        };
        // Echo's own dispatchable objects need the loader's dispatch pointer.
        if !cbs.iter().all(|cb| dev.set_loader_data(*cb)) {
            free("setting the loader's dispatch data of echo's command buffers");
            return None;
        }
        let begin_info = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
        let mut ok = true;
        for (k, cb) in cbs.iter().enumerate() {
            // SAFETY: freshly allocated command buffers of echo's pool, recorded once.
            unsafe {
                if (fp.begin_command_buffer)(*cb, &begin_info) != vk::Result::SUCCESS {
                    ok = false;
                    continue;
                }
                if k == 0 {
                    (fp.cmd_reset_query_pool)(*cb, q.query_pool, 2 * i, 2);
                }
                (fp.cmd_write_timestamp)(
                    *cb,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    q.query_pool,
                    2 * i + k as u32,
                );
                ok &= (fp.end_command_buffer)(*cb) == vk::Result::SUCCESS;
            }
        }
        if !ok {
            free("recording echo's timestamp command buffers");
            return None;
        }
        q.slots.push(Slot {
            begin: cbs[0],
            end: cbs[1],
            used: false,
            last: (u64::MAX, u64::MAX),
        });
        Some(i)
    }

    /// Before a submission goes down (its record takes `seq`): the submission counted, and the
    /// batches to send in place of the application's, with echo's timestamp command buffers
    /// first and last (`None`: send them as they are) — `vkQueueSubmit`'s and
    /// `vkQueueSubmit2`'s alike (`submit::Batch`).
    ///
    /// # Safety
    /// Every batch is valid.
    pub unsafe fn wrap<B: Batch>(
        &self,
        dev: &Device,
        queue: u64,
        seq: u64,
        batches: &[B],
    ) -> (Wrapped<'_>, Option<Sent<B>>) {
        let signals: Vec<(u64, u64)> = batches.iter().flat_map(|b| b.signals()).collect();
        if batches.iter().all(|b| b.entries().is_empty()) {
            // No GPU work to time; counted all the same (the device is not idle before the
            // host saw it complete).
            return (self.prepare(dev, queue, seq, &[], false, signals), None);
        }
        let cbs: Vec<Vec<vk::CommandBuffer>> = batches
            .iter()
            .map(|b| {
                b.entries()
                    .iter()
                    .map(|e| vk::CommandBuffer::from_raw(B::handle(e)))
                    .collect()
            })
            .collect();
        // Only timeline values may be chained: anything else may count the command buffers
        // (device groups) or constrain them (protected submissions).
        let plain = batches
            .iter()
            .all(|b| b.plain() && !b.protected() && b.entries().iter().all(B::entry_plain));
        let w = self.prepare(dev, queue, seq, &cbs, plain, signals);
        let sent = w.slot.as_ref().map(|slot| {
            let (first, last) = slot.batches;
            let mut lists: Vec<Vec<B::Entry>> =
                batches.iter().map(|b| b.entries().to_vec()).collect();
            lists[first].insert(0, B::entry_of(slot.begin));
            lists[last].push(B::entry_of(slot.end));
            let batches = batches
                .iter()
                .zip(&lists)
                .map(|(b, l)| b.with_entries(l.as_ptr(), l.len() as u32))
                .collect();
            Sent {
                _lists: lists,
                batches,
            }
        });
        (w, sent)
    }

    /// What both submit forms share: the submission is counted (the device is not idle until
    /// the host saw it complete) and takes a slot when it may carry echo's command buffers.
    /// The returned value holds the gate shared until the submission went down.
    fn prepare(
        &self,
        dev: &Device,
        queue: u64,
        seq: u64,
        cbs: &[Vec<vk::CommandBuffer>],
        plain: bool,
        signals: Vec<(u64, u64)>,
    ) -> Wrapped<'_> {
        let mut w = Wrapped {
            signals,
            gate: Some(self.gate.read().unwrap_or_else(|p| p.into_inner())),
            ..Wrapped::nothing(queue, seq)
        };
        if !self.on() {
            return w;
        }
        // The command buffers (and the secondaries they execute) whose copies this runs. One
        // submitted before and not read since is not pending now; its results are left (a read
        // may wait for the device on some drivers, and the device is not idle now).
        for cb in cbs.iter().flatten() {
            let c = raw(*cb);
            let secondaries = self
                .cmds
                .get(&c)
                .map(|x| x.secondaries.clone())
                .unwrap_or_default();
            for x in std::iter::once(c).chain(secondaries) {
                if let Some(mut e) = self.cmds.get_mut(&x) {
                    if !e.copies.is_empty() {
                        e.submitted = Some((queue, seq));
                        w.cmds.push(x);
                    }
                }
            }
        }
        let q = self.queue_timer(dev, queue);
        let first = cbs.iter().position(|b| !b.is_empty());
        let last = cbs.iter().rposition(|b| !b.is_empty());
        let (Some(first), Some(last), true) = (first, last, plain) else {
            return w;
        };
        let mut g = lock(&q);
        if let Some(i) = self.take_slot(dev, &mut g) {
            let s = &g.slots[i as usize];
            w.slot = Some(WrappedSlot {
                index: i,
                begin: s.begin,
                end: s.end,
                batches: (first, last),
            });
        }
        w
    }

    /// After the submission went down (`ok`: it succeeded), with the application's fence.
    pub fn submitted(&self, w: Wrapped<'_>, fence: u64, ok: bool) {
        let Some(q) = self.queues.get(&w.queue).map(|q| q.clone()) else {
            return;
        };
        let mut g = lock(&q);
        if !ok {
            self.unsubmit(&w);
            if let Some(s) = &w.slot {
                g.free.push(s.index);
            }
            return;
        }
        if g.pending.len() >= MAX_PENDING {
            // Never observed complete: its slot is lost (it may still run), and the device is
            // taken as busy until an idle wait says otherwise.
            g.pending.pop_front();
        }
        g.pending.push_back(Pending {
            submit: w.seq,
            slot: w.slot.as_ref().map(|s| s.index),
            fence,
            signals: w.signals.clone(),
            cmds: w.cmds.clone(),
        });
        // `w` (and the gate it holds) goes now: the submission is in the driver and counted.
    }

    fn unsubmit(&self, w: &Wrapped<'_>) {
        for c in &w.cmds {
            if let Some(mut e) = self.cmds.get_mut(c) {
                if e.submitted == Some((w.queue, w.seq)) {
                    e.submitted = None;
                }
            }
        }
    }

    /// Whether observations matter to it (some queue has been used).
    pub fn watching(&self) -> bool {
        !self.queues.is_empty()
    }

    /// A host completion observation: the submissions it shows complete are set aside, and
    /// when the host has now seen every submission of the device complete, every result set
    /// aside is read. Only then: `vkGetQueryPoolResults` without the wait bit may still wait
    /// for the whole device (lavapipe 22.3 does), which would stall the program — or deadlock
    /// it, when a submission waits on a semaphore the host signals after this wait.
    pub fn observed(&self, event: &Event) {
        if !self.on() || self.queues.is_empty() {
            return;
        }
        for q in self.all_queues() {
            let mut g = lock(&q);
            let queue = g.queue;
            let upto = match event {
                // A fence's signal covers every earlier submission on its queue.
                Event::FenceSignaled { fences } => g
                    .pending
                    .iter()
                    .rposition(|p| p.fence != 0 && fences.contains(&p.fence)),
                Event::QueueWaitIdle { queue: w } if *w == queue => g.pending.len().checked_sub(1),
                Event::DeviceWaitIdle => g.pending.len().checked_sub(1),
                // So does a timeline value reached (binary semaphores are not waited on by the
                // host).
                Event::SemaphoreReached { semaphores } => g.pending.iter().rposition(|p| {
                    p.signals.iter().any(|(s, v)| {
                        *v > 0 && semaphores.iter().any(|(rs, rv)| rs == s && rv >= v)
                    })
                }),
                _ => None,
            };
            if let Some(upto) = upto {
                for _ in 0..=upto {
                    if let Some(p) = g.pending.pop_front() {
                        g.done.push_back(p);
                    }
                }
                while g.done.len() > MAX_PENDING {
                    g.done.pop_front();
                }
            }
        }
        self.read_if_idle(false);
    }

    fn all_queues(&self) -> Vec<Arc<Mutex<QueueTimer>>> {
        self.queues.iter().map(|e| e.value().clone()).collect()
    }

    /// Read every result set aside, if no submission is going down now and the host has seen
    /// every submission of the device complete (`force`: the device is idle by the rules, at
    /// `vkDestroyDevice`). Never blocks: the gate is only tried.
    pub(super) fn read_if_idle(&self, force: bool) -> bool {
        let Ok(_only) = self.gate.try_write() else {
            return false;
        };
        let queues = self.all_queues();
        if !force && queues.iter().any(|q| !lock(q).pending.is_empty()) {
            return false;
        }
        for q in queues {
            let mut g = lock(&q);
            while let Some(p) = g.done.pop_front() {
                self.complete(&mut g, p);
            }
        }
        true
    }

    /// Results of a pair of queries, if both are available (never waits).
    fn results(&self, pool: vk::QueryPool, first: u32, mask: u64) -> Option<(u64, u64)> {
        let mut out = [0u64; 4];
        // SAFETY: 2 queries, 2 × (value, availability) u64s, no wait.
        let r = unsafe {
            (self.fp.get_query_pool_results)(
                self.device,
                pool,
                first,
                2,
                std::mem::size_of_val(&out),
                out.as_mut_ptr() as *mut std::ffi::c_void,
                16,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        if r != vk::Result::SUCCESS && r != vk::Result::NOT_READY {
            self.fail("vkGetQueryPoolResults", r);
            return None;
        }
        (out[1] != 0 && out[3] != 0).then_some((out[0] & mask, out[2] & mask))
    }

    /// A submission is complete: write its times and its copies'.
    fn complete(&self, g: &mut QueueTimer, p: Pending) {
        if let Some(slot) = p.slot {
            if let Some(v) = self.results(g.query_pool, 2 * slot, g.mask) {
                let s = &mut g.slots[slot as usize];
                if v != s.last {
                    s.last = v;
                    self.emit(g.queue, p.submit, None, v, g.mask);
                }
            }
            // Read or not, the submission is done: the slot's queries were reset on the
            // device, and it may be used again.
            g.slots[slot as usize].used = true;
            g.free.push(slot);
        }
        for c in &p.cmds {
            self.read_cmd_for(*c, Some((g.queue, p.submit)));
        }
    }

    /// Write one [`Event::GpuTime`] from a pair of tick values.
    fn emit(&self, queue: u64, submit: u64, copy: Option<u64>, v: (u64, u64), mask: u64) {
        let ticks = v.1.wrapping_sub(v.0) & mask;
        let dur = (ticks as f64 * self.period) as u64;
        let (clock, begin) = match self.clock() {
            Some(c) => {
                // Signed tick distance from the calibration, modulo the valid bits.
                let d = v.0.wrapping_sub(c.ticks) & mask;
                let d = if mask != u64::MAX && d > mask / 2 {
                    d as i128 - mask as i128 - 1
                } else {
                    d as i64 as i128
                };
                let host = c.host_ns as i128 + (d as f64 * self.period) as i128;
                let origin = sink::start_clock() as i128;
                (GpuClock::Host, (host - origin).max(0) as u64)
            }
            None => (GpuClock::Device, (v.0 as f64 * self.period) as u64),
        };
        self.sink.record(
            self.index,
            Event::GpuTime {
                queue,
                submit,
                copy,
                begin,
                end: begin + dur,
                clock,
            },
        );
    }

    /// `vkDestroyDevice` (the application waited for all its work): read what is left, destroy
    /// echo's objects.
    pub fn on_destroy_device(&self) {
        // The application waited for all its work (VUID-vkDestroyDevice-device-00378).
        self.observed(&Event::DeviceWaitIdle);
        self.read_if_idle(true);
        let cmds: Vec<u64> = self.cmds.iter().map(|e| *e.key()).collect();
        for c in cmds {
            self.read_cmd(c);
        }
        for e in self.queues.iter() {
            let g = lock(e.value());
            // SAFETY: echo's own objects; the device is idle.
            unsafe {
                (self.fp.destroy_command_pool)(self.device, g.cmd_pool, std::ptr::null());
                (self.fp.destroy_query_pool)(self.device, g.query_pool, std::ptr::null());
            }
        }
        self.queues.clear();
        if let Some(p) = lock(&self.copy_pool).take() {
            unsafe { (self.fp.destroy_query_pool)(self.device, p, std::ptr::null()) };
        }
    }
}

/// A submission as echo sends it down.
pub struct Wrapped<'a> {
    /// The gate, shared, from before the submission is counted until it went down.
    gate: Option<RwLockReadGuard<'a, ()>>,
    queue: u64,
    seq: u64,
    slot: Option<WrappedSlot>,
    cmds: Vec<u64>,
    signals: Vec<(u64, u64)>,
}

/// The batches echo sends in place of a submission's (its timestamp command buffers first and
/// last), and the command buffer lists they point into.
pub struct Sent<B: Batch> {
    _lists: Vec<Vec<B::Entry>>,
    batches: Vec<B>,
}

impl<B: Batch> Sent<B> {
    /// `(count, pointer)` for the call down.
    pub fn batches(&self) -> (u32, *const B) {
        (self.batches.len() as u32, self.batches.as_ptr())
    }
}

struct WrappedSlot {
    index: u32,
    begin: vk::CommandBuffer,
    end: vk::CommandBuffer,
    /// First and last batch with command buffers.
    batches: (usize, usize),
}

impl Wrapped<'_> {
    /// A submission sent as the application made it.
    fn nothing(queue: u64, seq: u64) -> Wrapped<'static> {
        Wrapped {
            gate: None,
            queue,
            seq,
            slot: None,
            cmds: Vec::new(),
            signals: Vec::new(),
        }
    }
}

/// `vkGetCalibratedTimestamps{KHR,EXT}` where echo (or the application) enabled the extension
/// and the device can calibrate its clock against `CLOCK_MONOTONIC`.
fn calibration(dev: &Device) -> Option<vk::PFN_vkGetCalibratedTimestampsKHR> {
    let (ext, get) = if dev.extensions.contains("VK_KHR_calibrated_timestamps") {
        ("KHR", c"vkGetCalibratedTimestampsKHR")
    } else if dev.extensions.contains("VK_EXT_calibrated_timestamps") {
        ("EXT", c"vkGetCalibratedTimestampsEXT")
    } else {
        return None;
    };
    // Resolved at vkCreateInstance: resolved now, a layer above (RenderDoc) may answer NULL.
    let domains = dev
        .instance
        .as_ref()?
        .get_physical_device_calibrateable_time_domains?;
    let mut n = 0u32;
    // SAFETY: the two-call idiom.
    let _ = unsafe { domains(dev.physical_device, &mut n, std::ptr::null_mut()) };
    let mut v = vec![vk::TimeDomainKHR::default(); n as usize];
    let r = unsafe { domains(dev.physical_device, &mut n, v.as_mut_ptr()) };
    v.truncate(n as usize);
    if r != vk::Result::SUCCESS
        || !v.contains(&vk::TimeDomainKHR::DEVICE)
        || !v.contains(&vk::TimeDomainKHR::CLOCK_MONOTONIC)
    {
        log::info!("profile: calibrated timestamps ({ext}) cannot map onto CLOCK_MONOTONIC here");
        return None;
    }
    // SAFETY: resolved by that name.
    dev.next_proc(get)
        .map(|f| unsafe { crate::records::typed(f) })
}

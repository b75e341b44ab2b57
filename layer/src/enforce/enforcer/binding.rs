//! Creation, allocation and bind of group members: `vkCreateBuffer`, `vkAllocateMemory` (the
//! memory type switched to a host-visible one, a member's own allocation recognised) and
//! `vkBindBufferMemory(2)` — the redirected bind into the partner's memory with its checks and
//! the bytes carried over, the bind held back until the partner is bound, and the held-back
//! bind done as asked at first use.

use super::{
    check_redirect, fp_bind, map_whole, req_of, Bind, BufRt, Enforcer, Inner, Redirect, Slot,
    Target,
};
use crate::log;
use crate::records::Device;
use ash::vk;
use ash::vk::Handle;
use echo_analyzer::apply::Role;
use echo_analyzer::plan::Direction;
use echo_analyzer::trace::ObjectKey;
use std::sync::atomic::Ordering;

impl Enforcer {
    // ------------------------------------------------------------------ creation

    /// `vkCreateBuffer` succeeded with stable key `key`.
    pub fn buffer_created(&self, buffer: u64, key: &ObjectKey) {
        self.note_creator(true, key);
        let mut roles = self.index.roles(key).to_vec();
        if roles.is_empty() {
            roles = self.index.beyond_roles(key);
        }
        if roles.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let mut slots = Vec::new();
        let mut guest = None;
        for role in &roles {
            if !self.ensure_group(&mut inner, role.group()) {
                continue;
            }
            let Some(g) = inner.groups.get_mut(&role.group()) else {
                continue;
            };
            let slot = match *role {
                Role::Device { group, .. } => {
                    if g.device.is_some() || g.device_seen {
                        continue; // a second buffer with the key: not the planned one
                    }
                    g.device = Some(buffer);
                    g.device_seen = true;
                    Slot::Device(group)
                }
                Role::Staging { group, member, .. } => {
                    let Some(m) = g.members.get_mut(member) else {
                        continue;
                    };
                    if m.buffer.is_some() || m.seen {
                        continue;
                    }
                    m.buffer = Some(buffer);
                    m.seen = true;
                    Slot::Staging(group, member)
                }
            };
            if matches!(
                (slot, g.direction),
                (Slot::Staging(..), Direction::StagingIntoDevice)
                    | (Slot::Device(_), Direction::DeviceIntoStaging)
            ) {
                guest = Some(slot);
            }
            slots.push(slot);
        }
        if slots.is_empty() {
            return;
        }
        log::debug!("enforce: buffer {buffer:#x} ({key}) is {slots:?}");
        self.group_of
            .insert(buffer, slots.iter().map(|s| s.group()).collect());
        inner.bufs.insert(
            buffer,
            BufRt {
                slots,
                guest,
                bind: Bind::Unbound,
                key: key.clone(),
                early: None,
            },
        );
    }

    /// `vkAllocateMemory`: the memory type to allocate instead, when the allocation is dedicated
    /// to a `StagingIntoDevice` device buffer and its type is not host-visible (the staging
    /// buffers' maps will be served from it).
    pub fn allocation_type(
        &self,
        dedicated_to: Option<u64>,
        type_index: u32,
        dev: &Device,
    ) -> Option<u32> {
        let d = dedicated_to?;
        if self.host_visible(type_index) {
            return None;
        }
        let inner = self.lock();
        let b = inner.bufs.get(&d)?;
        let g = b.slots.iter().find_map(|s| match s {
            Slot::Device(g) => Some(*g),
            _ => None,
        })?;
        if inner.groups.get(&g)?.direction != Direction::StagingIntoDevice {
            return None;
        }
        let t = self.alias_type?;
        let bits = dev.state.buffers.get(&d)?.requirements.memory_type_bits;
        if bits & (1 << t) == 0 {
            return None;
        }
        log::info!(
            "enforce: the allocation dedicated to device buffer {d:#x} (group {g}) gets host-visible memory type {t} instead of {type_index}"
        );
        Some(t)
    }

    /// `vkAllocateMemory` succeeded (state recorded, with the key of the application's request);
    /// `switched`: the type [`Self::allocation_type`] chose instead.
    pub fn memory_allocated(&self, dev: &Device, memory: u64, switched: Option<u32>) {
        let key = {
            let Some(mut s) = dev.state.memory.get_mut(&memory) else {
                return;
            };
            if let Some(t) = switched {
                s.type_index = t;
            }
            s.key.clone()
        };
        if let Some(k) = &key {
            self.note_creator(false, k);
        }
        if let Some(owner) = key.and_then(|k| self.member_of_memory(&k)) {
            log::debug!(
                "enforce: allocation {memory:#x} is the own allocation of group {} member {}",
                owner.0,
                owner.1
            );
            let mut inner = self.lock();
            if self.ensure_group(&mut inner, owner.0) {
                inner.mems.entry(memory).or_default().owner = Some(owner);
            }
        }
    }

    // ------------------------------------------------------------------ binds

    /// `vkBindBufferMemory` (or one element of `vkBindBufferMemory2`). `down(memory, offset)`
    /// binds the application's buffer through the next layer; `has_next`: the bind carried
    /// extension structures (never deferred).
    pub fn bind(
        &self,
        dev: &Device,
        buffer: u64,
        memory: u64,
        offset: u64,
        has_next: bool,
        down: &mut dyn FnMut(u64, u64) -> vk::Result,
    ) -> vk::Result {
        let mut inner = self.lock();
        let Some((slots, guest)) = inner.bufs.get(&buffer).map(|b| (b.slots.clone(), b.guest))
        else {
            if self.is_virtual(&inner, memory) {
                // A buffer the plan does not name, bound into an allocation echo did not make.
                return self.plain_bind(dev, &mut inner, buffer, memory, offset, down);
            }
            drop(inner);
            if let Some(g) = &self.guard {
                // Its host writes must reach the GPU as in the program: the guard lets go.
                g.foreign_bind(memory, buffer);
            }
            return plain_bind(dev, buffer, memory, offset, down);
        };
        match guest {
            // The owner of the shared range (of each of its groups): bind as asked, then the
            // guests waiting for it.
            None => {
                let r = self.plain_bind(dev, &mut inner, buffer, memory, offset, down);
                if let Some(b) = inner.bufs.get_mut(&buffer) {
                    b.bind = Bind::Done;
                }
                if r == vk::Result::SUCCESS {
                    for s in slots {
                        self.release_guests(dev, &mut inner, s.group());
                    }
                }
                r
            }
            Some(_) if inner.bufs.get(&buffer).and_then(|b| b.early).is_some() => {
                let expected = inner.bufs.get(&buffer).and_then(|b| b.early);
                if expected != Some((memory, offset)) {
                    log::error!(
                        "enforce: staging buffer {buffer:#x} is bound at offset {offset} of {memory:#x}, but echo had already bound it where the plan said (its map was served before the bind); the host's view of it may be wrong"
                    );
                }
                vk::Result::SUCCESS
            }
            Some(guest) => {
                let host_bound = self.host_binding(dev, &inner, guest).is_some();
                if !host_bound && !has_next {
                    if let Some(b) = inner.bufs.get_mut(&buffer) {
                        b.bind = Bind::Pending { memory, offset };
                    }
                    self.pending.fetch_add(1, Ordering::Relaxed);
                    log::debug!("enforce: bind of {buffer:#x} deferred until its partner is bound");
                    return vk::Result::SUCCESS;
                }
                if !host_bound {
                    self.set_outcome(
                        &mut inner,
                        guest,
                        Err(
                            "bound (with extension structures) before its partner was bound".into(),
                        ),
                    );
                    if let Some(b) = inner.bufs.get_mut(&buffer) {
                        b.bind = Bind::Done;
                    }
                    return self.plain_bind(dev, &mut inner, buffer, memory, offset, down);
                }
                self.alias(dev, &mut inner, guest, buffer, memory, offset, down)
            }
        }
    }

    /// Where the host of `guest`'s range is bound: `d` for a staging member of
    /// `StagingIntoDevice`, member 0 for the device buffer of `DeviceIntoStaging`.
    pub(super) fn host_binding(
        &self,
        dev: &Device,
        inner: &Inner,
        guest: Slot,
    ) -> Option<(u64, u64)> {
        let g = inner.groups.get(&guest.group())?;
        let host = match (guest, g.direction) {
            (Slot::Staging(..), Direction::StagingIntoDevice) => g.device?,
            (Slot::Device(_), Direction::DeviceIntoStaging) => g.members.first()?.buffer?,
            _ => return None,
        };
        if inner.bufs.get(&host)?.bind != Bind::Done {
            return None;
        }
        let bound = dev.state.buffers.get(&host)?.bound?;
        // A host bound into an allocation echo did not make (or made late) hosts no guest: the
        // shared range must be driver memory echo can map and bind into.
        if self.is_virtual(inner, bound.0) {
            return None;
        }
        Some(bound)
    }

    pub(super) fn set_outcome(&self, inner: &mut Inner, guest: Slot, outcome: Result<(), String>) {
        if let Err(why) = &outcome {
            // Per member (issue 36): the group's other members may still apply.
            match guest {
                Slot::Staging(g, m) => {
                    log::info!("enforce: group {g} member {m} not applied: {why}")
                }
                Slot::Device(g) => log::info!("enforce: group {g} not applied: {why}"),
            }
        }
        let Some(g) = inner.groups.get_mut(&guest.group()) else {
            return;
        };
        let m = match guest {
            Slot::Staging(_, m) => m,
            Slot::Device(_) => 0,
        };
        if let Some(m) = g.members.get_mut(m) {
            m.outcome = Some(outcome);
        }
    }

    /// The host of group `g` was just bound: bind every guest that waited for it.
    fn release_guests(&self, dev: &Device, inner: &mut Inner, g: u32) {
        let waiting: Vec<(u64, Slot, u64, u64)> = inner
            .bufs
            .iter()
            .filter_map(|(&h, b)| match (b.bind, b.guest) {
                (Bind::Pending { memory, offset }, Some(s)) if s.group() == g => {
                    Some((h, s, memory, offset))
                }
                _ => None,
            })
            .collect();
        for (h, slot, memory, offset) in waiting {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            let mut down = |m: u64, o: u64| fp_bind(dev, h, m, o);
            let r = self.alias(dev, inner, slot, h, memory, offset, &mut down);
            if r != vk::Result::SUCCESS {
                log::warn!("enforce: deferred bind of buffer {h:#x} failed: {r:?}");
            }
        }
    }

    /// Binds guest `buffer` into its host's memory when every check passes, else as the
    /// application asked (recording why).
    #[allow(clippy::too_many_arguments)]
    fn alias(
        &self,
        dev: &Device,
        inner: &mut Inner,
        slot: Slot,
        buffer: u64,
        memory: u64,
        offset: u64,
        down: &mut dyn FnMut(u64, u64) -> vk::Result,
    ) -> vk::Result {
        if let Some(b) = inner.bufs.get_mut(&buffer) {
            b.bind = Bind::Done;
        }
        let plan = match slot {
            Slot::Staging(..) => self.plan_staging_alias(dev, inner, slot, buffer, memory, offset),
            Slot::Device(g) => {
                let proven = inner.groups.get(&g).is_some_and(|x| x.device_mapped);
                if proven {
                    Ok(())
                } else {
                    self.refuse_written_guest(dev, memory)
                }
                .and_then(|()| self.plan_device_alias(dev, inner, slot, buffer))
            }
        };
        let (target, at, redirect, carry) = match plan {
            Ok(p) => p,
            Err(why) => {
                self.set_outcome(inner, slot, Err(why));
                return self.plain_bind(dev, inner, buffer, memory, offset, down);
            }
        };
        let r = down(target, at);
        if r != vk::Result::SUCCESS {
            if let Some(c) = carry {
                c.abandon(dev);
            }
            self.set_outcome(
                inner,
                slot,
                Err(format!("the redirected bind failed ({r:?})")),
            );
            return self.plain_bind(dev, inner, buffer, memory, offset, down);
        }
        if let Some(c) = carry {
            let n = c.run(dev);
            self.c.bytes_carried.fetch_add(n, Ordering::Relaxed);
            log::debug!(
                "enforce: {n} bytes the host wrote into buffer {buffer:#x}'s own allocation before its bind carried into {target:#x} at {at}"
            );
        }
        if let Some(mut b) = dev.state.buffers.get_mut(&buffer) {
            b.bound = Some((target, at));
        }
        inner.mems.entry(target).or_default().guests.insert(buffer);
        if let Some(b) = inner.mems.get_mut(&memory).and_then(|m| m.block.as_mut()) {
            // A device buffer of an allocation made in part: its bytes live at `at` of `target`
            // now, which stays while the allocation lives (a late allocation takes them there).
            let len = dev
                .state
                .buffers
                .get(&buffer)
                .map_or(0, |b| b.requirements.size);
            b.aliased.push((offset, len, target, at));
            inner.mems.entry(target).or_default().guests.insert(memory);
        }
        if let Some(g) = &self.guard {
            g.aliased(target);
        }
        if let Some(rd) = redirect {
            inner.mems.entry(memory).or_default().redirect = Some(rd);
        }
        self.c.binds_redirected.fetch_add(1, Ordering::Relaxed);
        self.any_alias.store(true, Ordering::Release);
        log::debug!("enforce: buffer {buffer:#x} bound into {target:#x} at {at}");
        self.set_outcome(inner, slot, Ok(()));
        vk::Result::SUCCESS
    }

    /// `StagingIntoDevice`: where staging buffer `h` goes in `d`'s memory, and the map redirect
    /// of `h`'s own allocation `memory`.
    fn plan_staging_alias(
        &self,
        dev: &Device,
        inner: &mut Inner,
        slot: Slot,
        h: u64,
        memory: u64,
        offset: u64,
    ) -> Result<(u64, u64, Option<Redirect>, Option<Carry>), String> {
        let Slot::Staging(g, m) = slot else {
            return Err("internal: not a staging member".into());
        };
        let delta = inner.groups[&g].members[m].delta;
        let d = inner.groups[&g].device.ok_or("its device buffer is gone")?;
        self.identities_ok(inner, h, d)?;
        let (dmem, doff) = self
            .host_binding(dev, inner, slot)
            .ok_or("its device buffer is not bound")?;
        let target_off = doff as i128 - delta as i128;
        let shift = target_off - offset as i128;
        self.check_staging_target(dev, inner, g, m, h, memory, dmem, target_off)?;
        if let Some(rd) = inner.mems.get(&memory).and_then(|x| x.redirect) {
            if rd
                != (Redirect {
                    target: dmem,
                    shift,
                })
            {
                log::error!(
                    "enforce: staging buffer {h:#x} is bound at offset {offset} of its allocation, not where the plan said; its allocation's map was already redirected, so the host's writes land in the device buffer's memory: results may be wrong"
                );
                return Err(format!(
                    "bound at offset {offset} of its allocation, not at {} as in the plan",
                    inner.groups[&g].members[m].memory_offset
                ));
            }
        }
        let (mapped_now, written) = dev
            .state
            .memory
            .get(&memory)
            .map_or((false, false), |s| (s.mapped.is_some(), s.host_mapped));
        let redirected = inner
            .mems
            .get(&memory)
            .is_some_and(|x| x.redirect.is_some());
        // The application still holds a pointer into its own allocation: later writes through it
        // would not reach the shared range (the analysis refuses such a member from the trace).
        echo_analyzer::apply::check_staging_mapping(mapped_now, redirected)?;
        let dst = self.ensure_echo_map(dev, inner, dmem)?;
        // Never lose a byte (DESIGN §6): what the host wrote into the buffer's range of its own
        // allocation before this bind (map → memcpy → unmap → bind) moves with it, once.
        // An allocation echo made late holds its bytes in the real allocation; one it never made
        // was only ever mapped through the redirect (nothing to carry).
        let source = self.physical(inner, memory);
        let carry = if !redirected && written && !self.skip_carry && source.is_some() {
            let len = dev.state.buffers.get(&h).map_or(0, |b| b.size);
            Some(Carry::prepare(
                dev,
                (memory, source.unwrap_or(memory)),
                offset,
                len,
                (dmem, dst + target_off as usize),
                (self.coherent(dev, memory), self.coherent(dev, dmem)),
            )?)
        } else {
            None
        };
        Ok((
            dmem,
            target_off as u64,
            Some(Redirect {
                target: dmem,
                shift,
            }),
            carry,
        ))
    }

    /// `DeviceIntoStaging` binds the device buffer into the staging range, so bytes the host
    /// may have written into the device buffer's own allocation before its bind would not be
    /// where it reads them: refuse (nothing is lost; the group is not applied) — unless the plan
    /// says the device buffer lives in a mapped block whose bytes under it the host never
    /// touches and no GPU command reads before writing (`device_mapped`, issue 12).
    fn refuse_written_guest(&self, dev: &Device, memory: u64) -> Result<(), String> {
        if dev.state.memory.get(&memory).is_some_and(|s| s.host_mapped) {
            return Err(
                "its own allocation was mapped by the host before the bind, and bytes written there would not be where the aliased buffer reads them"
                    .into(),
            );
        }
        Ok(())
    }

    /// The checks of a `StagingIntoDevice` alias of member `(g, m)` (buffer `h`, own allocation
    /// `memory`) into `dmem` at `target_off`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_staging_target(
        &self,
        dev: &Device,
        inner: &Inner,
        g: u32,
        m: usize,
        h: u64,
        memory: u64,
        dmem: u64,
        target_off: i128,
    ) -> Result<(), String> {
        if let Some(why) = self.guard_refuses(Some(dmem)) {
            return Err(why);
        }
        let (dtype, dsize) = {
            let s = dev
                .state
                .memory
                .get(&dmem)
                .ok_or("the device allocation is unknown")?;
            (s.type_index, s.size)
        };
        if !self.host_visible(dtype) {
            return Err(format!(
                "the device buffer's memory (type {dtype}) is not host-visible, so the staging maps cannot be served from it"
            ));
        }
        let req = req_of(
            &dev.state
                .buffers
                .get(&h)
                .ok_or("the staging buffer is unknown")?
                .requirements,
        );
        check_redirect(
            &req,
            &Target {
                memory_type: dtype,
                memory_size: dsize,
                offset: target_off,
            },
        )
        .map_err(|r| format!("staging buffer into the device allocation: {r}"))?;
        let (own, msize) = {
            let s = dev
                .state
                .memory
                .get(&memory)
                .ok_or("its allocation is unknown")?;
            let by_key = inner.mems.get(&memory).and_then(|x| x.owner) == Some((g, m))
                && s.key.as_ref().is_some_and(|k| !self.ambiguous(false, k));
            (s.dedicated_buffer == Some(h) || by_key, s.size)
        };
        if !own {
            return Err(
                "its allocation was not recognised as its own (sub-allocated, or another key than in the plan), so its map cannot be redirected"
                    .into(),
            );
        }
        // Every byte the app can map of its allocation must land inside the device allocation.
        let offset_in_own = match inner.bufs.get(&h).map(|b| b.bind) {
            Some(Bind::Pending { offset, .. }) => offset,
            _ => dev
                .state
                .buffers
                .get(&h)
                .and_then(|b| b.bound.map(|x| x.1))
                .unwrap_or(inner.groups[&g].members[m].memory_offset),
        };
        echo_analyzer::apply::check_map_redirect(target_off, offset_in_own, msize, dsize)?;
        Ok(())
    }

    /// `DeviceIntoStaging`: where device buffer `d` goes in member 0's memory.
    fn plan_device_alias(
        &self,
        dev: &Device,
        inner: &mut Inner,
        slot: Slot,
        d: u64,
    ) -> Result<(u64, u64, Option<Redirect>, Option<Carry>), String> {
        if let Some(why) = self.guard_refuses(None) {
            return Err(why);
        }
        let g = slot.group();
        let first = inner.groups[&g].members.first().ok_or("no member")?;
        let delta = first.delta;
        self.identities_ok(inner, d, first.buffer.ok_or("its staging buffer is gone")?)?;
        let (hmem, hoff) = self
            .host_binding(dev, inner, slot)
            .ok_or("its staging buffer is not bound")?;
        let (htype, hsize) = {
            let s = dev
                .state
                .memory
                .get(&hmem)
                .ok_or("the staging allocation is unknown")?;
            (s.type_index, s.size)
        };
        let req = req_of(
            &dev.state
                .buffers
                .get(&d)
                .ok_or("the device buffer is unknown")?
                .requirements,
        );
        let at = hoff as i128 + delta as i128;
        check_redirect(
            &req,
            &Target {
                memory_type: htype,
                memory_size: hsize,
                offset: at,
            },
        )
        .map_err(|r| format!("device buffer into the staging allocation: {r}"))?;
        Ok((hmem, at as u64, None, None))
    }

    // ------------------------------------------------------------------ first use

    /// Some bind is held back until its partner is bound.
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed) > 0
    }

    /// A command, descriptor or map uses `buffer`: a bind still held back is done now, as the
    /// application asked.
    #[inline]
    pub fn touch(&self, dev: &Device, buffer: u64) {
        if self.pending.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut inner = self.lock();
        self.force_pending(dev, &mut inner, |h, _, _| h == buffer);
    }

    /// A command echo steps aside from (`hooks/aside.rs`) names `buffers` (or, `everything`,
    /// whatever is bound): binds still held back for them happen now (no command may name a
    /// buffer with no memory bound), the guard counts them as used by `cmd`, and when one of
    /// them is a member of a group this run aliased — which a plan made from a profile of the
    /// same program cannot hold, since the profile stepped aside from it — echo says so once.
    pub fn on_aside(
        &self,
        dev: &Device,
        cmd: Option<u64>,
        command: &str,
        everything: bool,
        buffers: &[u64],
    ) {
        if self.pending.load(Ordering::Relaxed) > 0 {
            let mut inner = self.lock();
            self.force_pending(dev, &mut inner, |h, _, _| {
                everything || buffers.contains(&h)
            });
        }
        if let (Some(g), Some(cb)) = (self.guard(), cmd) {
            if everything {
                g.use_all(cb);
            } else {
                g.use_buffers(dev, cb, buffers);
            }
        }
        let aliased = self.any_alias.load(Ordering::Relaxed)
            && (everything || buffers.iter().any(|b| self.group_of.contains_key(b)));
        if aliased {
            log::warn_once(
                command,
                format_args!(
                    "enforce: {command} reaches {} echo aliased, and echo does not follow it; the plan was made from a run that did not call it — re-profile this program",
                    if everything { "buffers" } else { "a buffer" }
                ),
            );
        }
    }

    /// Binds as asked every held-back guest `pick(buffer, memory, slot)` selects.
    pub(super) fn force_pending(
        &self,
        dev: &Device,
        inner: &mut Inner,
        pick: impl Fn(u64, u64, Slot) -> bool,
    ) {
        let due: Vec<(u64, Slot, u64, u64)> = inner
            .bufs
            .iter()
            .filter_map(|(&h, b)| match (b.bind, b.guest) {
                (Bind::Pending { memory, offset }, Some(s)) if pick(h, memory, s) => {
                    Some((h, s, memory, offset))
                }
                _ => None,
            })
            .collect();
        for (h, slot, memory, offset) in due {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            if let Some(b) = inner.bufs.get_mut(&h) {
                b.bind = Bind::Done;
            }
            self.set_outcome(
                inner,
                slot,
                Err("used before its partner was bound; bound as the application asked".into()),
            );
            let r = self.plain_bind(dev, inner, h, memory, offset, &mut |m, o| {
                fp_bind(dev, h, m, o)
            });
            if r != vk::Result::SUCCESS {
                log::warn!("enforce: held-back bind of buffer {h:#x} failed: {r:?}");
            }
        }
    }
}

/// Bytes of a staging buffer's own allocation to move into the shared range at its redirected
/// bind. Prepared (source mapped through the next layer) before the bind, so a failure leaves
/// the bind as the application asked; run only after the redirected bind succeeded.
pub(super) struct Carry {
    memory: u64,
    src: usize,
    len: usize,
    dst_memory: u64,
    dst: usize,
    /// The destination memory is host-coherent (else echo flushes what it wrote).
    dst_coherent: bool,
    src_coherent: bool,
}

impl Carry {
    /// `(memory, physical)`: the application's handle (its size is in the state) and the
    /// allocation that holds its bytes at the driver (the same, unless echo made it late).
    fn prepare(
        dev: &Device,
        (memory, physical): (u64, u64),
        offset: u64,
        len: u64,
        (dst_memory, dst): (u64, usize),
        (src_coherent, dst_coherent): (bool, bool),
    ) -> Result<Carry, String> {
        let size = dev
            .state
            .memory
            .get(&memory)
            .map(|m| m.size)
            .ok_or("its allocation is unknown")?;
        let len = len.min(size.saturating_sub(offset));
        // The application does not map it now (checked by the caller); mapping the whole
        // allocation needs no atom alignment.
        let p = map_whole(dev, physical).map_err(|r| {
            format!(
                "the bytes written into its allocation before the bind could not be read to carry them over (map failed: {r:?})"
            )
        })?;
        Ok(Carry {
            memory: physical,
            src: p + offset as usize,
            len: len as usize,
            dst_memory,
            dst,
            dst_coherent,
            src_coherent,
        })
    }

    fn whole(memory: u64) -> vk::MappedMemoryRange<'static> {
        vk::MappedMemoryRange {
            memory: vk::DeviceMemory::from_raw(memory),
            offset: 0,
            size: vk::WHOLE_SIZE,
            ..Default::default()
        }
    }

    /// Copies the bytes and unmaps the source; returns the bytes moved.
    fn run(self, dev: &Device) -> u64 {
        // SAFETY: src is inside echo's own mapping of the staging allocation, dst inside echo's
        // mapping of the device allocation (checked by check_redirect), len within both; no GPU
        // work can use the range yet: the buffer is only now bound there.
        unsafe {
            if !self.src_coherent {
                let r = Carry::whole(self.memory);
                let _ = (dev.fp.invalidate_mapped_memory_ranges)(dev.handle, 1, &r);
            }
            std::ptr::copy_nonoverlapping(self.src as *const u8, self.dst as *mut u8, self.len);
            if !self.dst_coherent {
                let r = Carry::whole(self.dst_memory);
                let _ = (dev.fp.flush_mapped_memory_ranges)(dev.handle, 1, &r);
            }
        }
        let n = self.len as u64;
        self.abandon(dev);
        n
    }

    /// Unmaps the source without copying (the redirected bind failed).
    fn abandon(self, dev: &Device) {
        // SAFETY: echo mapped it in `prepare`.
        unsafe { (dev.fp.unmap_memory)(dev.handle, vk::DeviceMemory::from_raw(self.memory)) };
    }
}

/// Binds through the next layer as asked and records where.
pub(super) fn plain_bind(
    dev: &Device,
    buffer: u64,
    memory: u64,
    offset: u64,
    down: &mut dyn FnMut(u64, u64) -> vk::Result,
) -> vk::Result {
    let r = down(memory, offset);
    if r == vk::Result::SUCCESS {
        if let Some(mut b) = dev.state.buffers.get_mut(&buffer) {
            b.bound = Some((memory, offset));
        }
    }
    r
}

//! The transfer commands that touch buffers (chapter "Copy Commands", "Clear Commands"): buffer
//! copies (self-copy regions dropped by enforce, one substitute barrier in their place), fills,
//! updates, and copies between buffers and images. Recording hooks are on the hot path: no
//! global lock, one map lookup at most.

use super::calls_gen;
use super::uses::{buffer_use as buse, uses, Work};
use crate::dispatch::{raw, slice, DeviceData};
use ash::vk;
use echo_analyzer::trace::{Access, CopyRegion, UseKind};
use std::ffi::c_void;

/// The buffer range a buffer↔image copy touches (lowest offset, whole rest: conservative).
unsafe fn image_copy_range(count: u32, regions: *const vk::BufferImageCopy) -> u64 {
    if count == 0 || regions.is_null() {
        return 0;
    }
    std::slice::from_raw_parts(regions, count as usize)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0)
}

/// A command that reads (`to_image`) or writes a buffer as a buffer↔image copy, from `offset`
/// to the end (conservative).
fn image_copy(
    dev: &DeviceData,
    cb: u64,
    command: &'static str,
    buffer: vk::Buffer,
    offset: u64,
    to_image: bool,
) {
    let (access, kind) = if to_image {
        (Access::Read, UseKind::ToImage)
    } else {
        (Access::Write, UseKind::FromImage)
    };
    let u = buse(buffer, offset, vk::WHOLE_SIZE, access, kind);
    uses(dev, cb, command, Work::Names, &[u]);
}

pub unsafe fn vkCmdCopyBuffer(
    cx: &calls_gen::vkCmdCopyBuffer<'_>,
    cb: vk::CommandBuffer,
    src: vk::Buffer,
    dst: vk::Buffer,
    count: u32,
    regions: *const vk::BufferCopy,
) {
    let mut timed = None;
    if let (Some(p), false) = (cx.dev.profile(), regions.is_null()) {
        let r = std::slice::from_raw_parts(regions, count as usize)
            .iter()
            .map(|r| CopyRegion {
                src_offset: r.src_offset,
                dst_offset: r.dst_offset,
                size: r.size,
            })
            .collect();
        let seq = p.on_copy(cx.dev, raw(cb), raw(src), raw(dst), r);
        // Issue 47: GPU timestamps around it, in echo's query pool.
        timed = p
            .gpu()
            .and_then(|g| g.copy_before(raw(cb), seq).map(|t| (g, t)));
    }
    if let Some((g, t)) = timed {
        cx.down((cx.next)(cb, src, dst, count, regions));
        g.copy_after(raw(cb), t);
        return;
    }
    if let Some(g) = cx.dev.enforce().and_then(|e| e.guard()) {
        g.use_buffers(cx.dev, raw(cb), &[raw(src), raw(dst)]);
    }
    if let Some(e) = cx.dev.enforce() {
        // Self-copy regions dropped, one substitute barrier in their place.
        return e.cmd_copy_buffer(cx.dev, cb, src, dst, count, regions, |n, r| {
            cx.down((cx.next)(cb, src, dst, n, r))
        });
    }
    cx.down((cx.next)(cb, src, dst, count, regions))
}

pub unsafe fn vkCmdCopyBuffer2(
    cx: &calls_gen::vkCmdCopyBuffer2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CopyBufferInfo2<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        let i = &*info;
        let r = if i.p_regions.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(i.p_regions, i.region_count as usize)
                .iter()
                .map(|r| CopyRegion {
                    src_offset: r.src_offset,
                    dst_offset: r.dst_offset,
                    size: r.size,
                })
                .collect()
        };
        let seq = p.on_copy(cx.dev, raw(cb), raw(i.src_buffer), raw(i.dst_buffer), r);
        if let Some((g, t)) = p
            .gpu()
            .and_then(|g| g.copy_before(raw(cb), seq).map(|t| (g, t)))
        {
            cx.down((cx.next)(cb, info));
            g.copy_after(raw(cb), t);
            return;
        }
    }
    if let Some(g) = cx.dev.enforce().and_then(|e| e.guard()) {
        g.use_buffers(
            cx.dev,
            raw(cb),
            &[raw((*info).src_buffer), raw((*info).dst_buffer)],
        );
    }
    if let Some(e) = cx.dev.enforce() {
        return e.cmd_copy_buffer2(cx.dev, cb, info, |i| cx.down((cx.next)(cb, i)));
    }
    cx.down((cx.next)(cb, info))
}

pub unsafe fn vkCmdFillBuffer(
    cx: &calls_gen::vkCmdFillBuffer<'_>,
    cb: vk::CommandBuffer,
    dst: vk::Buffer,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    data: u32,
) {
    let u = buse(dst, offset, size, Access::Write, UseKind::Fill);
    uses(cx.dev, raw(cb), "vkCmdFillBuffer", Work::Names, &[u]);
    cx.down((cx.next)(cb, dst, offset, size, data))
}

pub unsafe fn vkCmdUpdateBuffer(
    cx: &calls_gen::vkCmdUpdateBuffer<'_>,
    cb: vk::CommandBuffer,
    dst: vk::Buffer,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    data: *const c_void,
) {
    let u = buse(dst, offset, size, Access::Write, UseKind::Update);
    uses(cx.dev, raw(cb), "vkCmdUpdateBuffer", Work::Names, &[u]);
    cx.down((cx.next)(cb, dst, offset, size, data))
}

pub unsafe fn vkCmdCopyBufferToImage(
    cx: &calls_gen::vkCmdCopyBufferToImage<'_>,
    cb: vk::CommandBuffer,
    src: vk::Buffer,
    dst: vk::Image,
    layout: vk::ImageLayout,
    count: u32,
    regions: *const vk::BufferImageCopy,
) {
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyBufferToImage",
        src,
        image_copy_range(count, regions),
        true,
    );
    cx.down((cx.next)(cb, src, dst, layout, count, regions))
}

pub unsafe fn vkCmdCopyImageToBuffer(
    cx: &calls_gen::vkCmdCopyImageToBuffer<'_>,
    cb: vk::CommandBuffer,
    src: vk::Image,
    layout: vk::ImageLayout,
    dst: vk::Buffer,
    count: u32,
    regions: *const vk::BufferImageCopy,
) {
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyImageToBuffer",
        dst,
        image_copy_range(count, regions),
        false,
    );
    cx.down((cx.next)(cb, src, layout, dst, count, regions))
}

pub unsafe fn vkCmdCopyBufferToImage2(
    cx: &calls_gen::vkCmdCopyBufferToImage2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CopyBufferToImageInfo2<'_>,
) {
    let i = &*info;
    let off = slice(i.p_regions, i.region_count)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0);
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyBufferToImage2",
        i.src_buffer,
        off,
        true,
    );
    cx.down((cx.next)(cb, info))
}

pub unsafe fn vkCmdCopyImageToBuffer2(
    cx: &calls_gen::vkCmdCopyImageToBuffer2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CopyImageToBufferInfo2<'_>,
) {
    let i = &*info;
    let off = slice(i.p_regions, i.region_count)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0);
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyImageToBuffer2",
        i.dst_buffer,
        off,
        false,
    );
    cx.down((cx.next)(cb, info))
}
